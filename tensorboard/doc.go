// Package tensorboard writes TensorBoard event files: the TFRecord-framed Event protocol buffers that
// TensorBoard, tf.summary and torch.utils.tensorboard read and write.
//
// A Writer appends scalar summaries (one Event per step, one Summary.Value per tag) to a file named as
// TensorFlow names them (events.out.tfevents.TIME.HOST.PID.N) in a log directory. It writes only what
// scalars need: the file-version event that opens every event file, then Event{wall_time, step,
// summary{value{tag, simple_value}}} records, each framed as TFRecord (length, masked CRC-32C of the
// length, data, masked CRC-32C of the data). The encoding follows tensorflow/core/util/event.proto and
// tensorflow/core/framework/summary.proto.
package tensorboard
