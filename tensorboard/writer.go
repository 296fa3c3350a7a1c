package tensorboard

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of tensorflow.Event, tensorflow.Summary and tensorflow.Summary.Value.
const (
	eventWallTime    protowire.Number = 1
	eventStep        protowire.Number = 2
	eventFileVersion protowire.Number = 3
	eventSummary     protowire.Number = 5

	summaryValue protowire.Number = 1

	valueTag         protowire.Number = 1
	valueSimpleValue protowire.Number = 2
)

// fileVersion is the version string of the first event of every event file.
const fileVersion = "brain.Event:2"

// Writer appends scalar summaries to one event file. It is not safe for concurrent use.
type Writer struct {
	path string
	f    *os.File
	w    *bufio.Writer
	now  func() time.Time
}

// Create makes dir (and its parents) and opens a new event file in it, named
// events.out.tfevents.TIME.HOST.PID.0 as TensorFlow names them, with its file-version event written.
func Create(dir string) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	now := time.Now()
	name := fmt.Sprintf("events.out.tfevents.%d.%s.%d.0", now.Unix(), host, os.Getpid())
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	w := &Writer{path: path, f: f, w: bufio.NewWriter(f), now: time.Now}
	var ev []byte
	ev = protowire.AppendTag(ev, eventWallTime, protowire.Fixed64Type)
	ev = protowire.AppendFixed64(ev, math.Float64bits(wallTime(now)))
	ev = protowire.AppendTag(ev, eventFileVersion, protowire.BytesType)
	ev = protowire.AppendString(ev, fileVersion)
	if err := w.record(ev); err != nil {
		f.Close()
		return nil, err
	}
	return w, w.Flush()
}

// Path returns the event file's path.
func (w *Writer) Path() string { return w.path }

// Scalars writes one event at step holding a simple_value for each tag, tags in sorted order.
// NaN and infinite values are written as they are (TensorBoard shows them as such).
func (w *Writer) Scalars(step int64, values map[string]float64) error {
	tags := make([]string, 0, len(values))
	for tag := range values {
		tags = append(tags, tag)
	}
	sort.Strings(tags)
	var summary []byte
	for _, tag := range tags {
		var v []byte
		v = protowire.AppendTag(v, valueTag, protowire.BytesType)
		v = protowire.AppendString(v, tag)
		v = protowire.AppendTag(v, valueSimpleValue, protowire.Fixed32Type)
		v = protowire.AppendFixed32(v, math.Float32bits(float32(values[tag])))
		summary = protowire.AppendTag(summary, summaryValue, protowire.BytesType)
		summary = protowire.AppendBytes(summary, v)
	}
	var ev []byte
	ev = protowire.AppendTag(ev, eventWallTime, protowire.Fixed64Type)
	ev = protowire.AppendFixed64(ev, math.Float64bits(wallTime(w.now())))
	ev = protowire.AppendTag(ev, eventStep, protowire.VarintType)
	ev = protowire.AppendVarint(ev, uint64(step))
	ev = protowire.AppendTag(ev, eventSummary, protowire.BytesType)
	ev = protowire.AppendBytes(ev, summary)
	return w.record(ev)
}

// Flush writes buffered events to the file.
func (w *Writer) Flush() error {
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("tensorboard: %s: %w", w.path, err)
	}
	return nil
}

// Close flushes and closes the file.
func (w *Writer) Close() error {
	err := w.Flush()
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("tensorboard: %s: %w", w.path, cerr)
	}
	return err
}

// record writes data framed as one TFRecord.
func (w *Writer) record(data []byte) error {
	var head [12]byte
	binary.LittleEndian.PutUint64(head[:8], uint64(len(data)))
	binary.LittleEndian.PutUint32(head[8:], maskedCRC(head[:8]))
	var tail [4]byte
	binary.LittleEndian.PutUint32(tail[:], maskedCRC(data))
	for _, b := range [][]byte{head[:], data, tail[:]} {
		if _, err := w.w.Write(b); err != nil {
			return fmt.Errorf("tensorboard: %s: %w", w.path, err)
		}
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's masked CRC-32C: rotate right by 15 bits and add a constant.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

func wallTime(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
