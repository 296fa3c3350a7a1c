package tensorboard

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// sample is what the tests write: three logging steps of two tags, as a trainer logs them.
var sample = []struct {
	step   int64
	values map[string]float64
}{
	{10, map[string]float64{"train/reward": 0.585, "train/loss": 0.0123}},
	{20, map[string]float64{"train/reward": 0.7, "train/loss": -0.004}},
	{30, map[string]float64{"train/reward": 0.794, "train/loss": 1e-6}},
}

func writeSample(t *testing.T, dir string) string {
	t.Helper()
	w, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sample {
		if err := w.Scalars(s.step, s.values); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Path()
}

// TestTensorBoardReads checks the event file with TensorBoard's own reader (the tensorboard package
// from PyPI, pinned in the Python test environment).
func TestTensorBoardReads(t *testing.T) {
	py := pythonWithTensorBoard(t)
	dir := t.TempDir()
	writeSample(t, dir)
	out, err := exec.Command(py, "testdata/read_events.py", dir).Output()
	if err != nil {
		t.Fatalf("read_events.py: %v\n%s", err, stderrOf(err))
	}
	var got map[string][][2]float64
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("read_events.py output %q: %v", out, err)
	}
	for _, tag := range []string{"train/reward", "train/loss"} {
		pts := got[tag]
		if len(pts) != len(sample) {
			t.Fatalf("%s: TensorBoard read %d points, want %d (all: %v)", tag, len(pts), len(sample), got)
		}
		for i, s := range sample {
			want := float64(float32(s.values[tag]))
			if int64(pts[i][0]) != s.step || pts[i][1] != want {
				t.Errorf("%s point %d: TensorBoard read step %v value %v, want step %d value %v", tag, i, pts[i][0], pts[i][1], s.step, want)
			}
		}
	}
}

// TestFraming checks the TFRecord framing and the Event encoding byte by byte, without Python.
func TestFraming(t *testing.T) {
	path := writeSample(t, t.TempDir())
	if !strings.HasPrefix(filepath.Base(path), "events.out.tfevents.") {
		t.Errorf("file name %q does not start with events.out.tfevents.", filepath.Base(path))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var records [][]byte
	for len(b) > 0 {
		if len(b) < 12 {
			t.Fatalf("%d trailing bytes", len(b))
		}
		n := binary.LittleEndian.Uint64(b[:8])
		if got, want := binary.LittleEndian.Uint32(b[8:12]), maskedCRC(b[:8]); got != want {
			t.Fatalf("record %d: length CRC %#x, want %#x", len(records), got, want)
		}
		data := b[12 : 12+n]
		if got, want := binary.LittleEndian.Uint32(b[12+n:16+n]), maskedCRC(data); got != want {
			t.Fatalf("record %d: data CRC %#x, want %#x", len(records), got, want)
		}
		records = append(records, data)
		b = b[16+n:]
	}
	if len(records) != 1+len(sample) {
		t.Fatalf("%d records, want %d", len(records), 1+len(sample))
	}
	if !bytes.Contains(records[0], []byte(fileVersion)) {
		t.Errorf("first record %q holds no file version", records[0])
	}
	for i, s := range sample {
		step, values := decodeEvent(t, records[i+1])
		if step != s.step || len(values) != len(s.values) {
			t.Fatalf("event %d: step %d values %v, want %d %v", i, step, values, s.step, s.values)
		}
		for tag, v := range s.values {
			if values[tag] != float32(v) {
				t.Errorf("event %d %s: %v, want %v", i, tag, values[tag], float32(v))
			}
		}
	}
}

// TestMaskedCRC checks the CRC against values computed by TensorFlow's masked_crc32c
// (tensorboard/compat/tensorflow_stub/pywrap_tensorflow.py).
func TestMaskedCRC(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint32
	}{
		// crc32c("") = 0, masked: 0xa282ead8; crc32c("123456789") = 0xe3069283 (the CRC-32C check value).
		{"", 0xa282ead8},
		{"123456789", 0xc78ab0e5},
	} {
		if got := maskedCRC([]byte(c.in)); got != c.want {
			t.Errorf("maskedCRC(%q) = %#x, want %#x", c.in, got, c.want)
		}
	}
}

// decodeEvent reads an Event's step and its summary's simple values.
func decodeEvent(t *testing.T, b []byte) (int64, map[string]float32) {
	t.Helper()
	var step int64
	values := map[string]float32{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		b = b[n:]
		switch {
		case num == eventStep && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			step, b = int64(v), b[n:]
		case num == eventSummary && typ == protowire.BytesType:
			summary, n := protowire.ConsumeBytes(b)
			b = b[n:]
			for len(summary) > 0 {
				_, _, n := protowire.ConsumeTag(summary)
				value, m := protowire.ConsumeBytes(summary[n:])
				summary = summary[n+m:]
				var tag string
				var v float32
				for len(value) > 0 {
					num, _, n := protowire.ConsumeTag(value)
					value = value[n:]
					if num == valueTag {
						s, n := protowire.ConsumeString(value)
						tag, value = s, value[n:]
					} else {
						x, n := protowire.ConsumeFixed32(value)
						v, value = math.Float32frombits(x), value[n:]
					}
				}
				values[tag] = v
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				t.Fatalf("bad field %d", num)
			}
			b = b[n:]
		}
	}
	return step, values
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
