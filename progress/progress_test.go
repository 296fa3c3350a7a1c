package progress

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

// fakeClock makes p read a clock that the returned function sets (a duration after the start).
func fakeClock(p *Printer) func(time.Duration) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	p.now = func() time.Time { return now }
	p.began = t0
	return func(d time.Duration) { now = t0.Add(d) }
}

func TestPlainLinePerLoggingStep(t *testing.T) {
	var buf bytes.Buffer
	p := New(&buf, "train", 40, 0)
	at := fakeClock(p)
	for step := 1; step <= 20; step++ {
		at(time.Duration(step) * 500 * time.Millisecond)
		p.Step(step, F("reward", 0.5))
		if step%10 == 0 {
			p.Log(step, F("reward", 0.612), Field{Name: "loss", Value: 0.01234, Format: "%.4f"}, F("kl", math.NaN()))
		}
	}
	p.Done()
	out := buf.String()
	if strings.ContainsAny(out, "\r\x1b") {
		t.Errorf("plain output holds carriage returns or escapes: %q", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []string{
		"train step 10/40  reward 0.612  loss 0.0123  kl -  0.50 s/step  ETA 0:15  elapsed 0:05",
		"train step 20/40  reward 0.612  loss 0.0123  kl -  0.50 s/step  ETA 0:10  elapsed 0:10",
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %q\nwant %q", i, lines[i], want[i])
		}
	}
}

// A resumed run's speed counts only the steps this process ran.
func TestResumedSpeed(t *testing.T) {
	var buf bytes.Buffer
	p := New(&buf, "train", 40, 30)
	at := fakeClock(p)
	at(5 * time.Second)
	p.Log(35)
	if got, want := buf.String(), "train step 35/40  1.00 s/step  ETA 0:05  elapsed 0:05\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	buf.Reset()
	at(time.Hour + 10*time.Second)
	p.Log(40)
	if got, want := buf.String(), "train step 40/40  361.00 s/step  elapsed 1:00:10\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestLiveBar(t *testing.T) {
	var buf bytes.Buffer
	p := New(&buf, "sft", 8, 0)
	p.live = true
	at := fakeClock(p)
	at(time.Second)
	p.Step(2, Field{Name: "loss", Value: 1.5, Format: "%.2f"})
	p.Printf("checkpoint %d saved", 2)
	at(2 * time.Second)
	p.Step(4, Field{Name: "loss", Value: 1.25, Format: "%.2f"})
	p.Done()
	want := "\r\x1b[Ksft [#####...............] 2/8  25%  loss 1.50  0.50 s/step  ETA 0:03  elapsed 0:01" +
		"\r\x1b[Kcheckpoint 2 saved\n" +
		"\r\x1b[Ksft [##########..........] 4/8  50%  loss 1.25  0.50 s/step  ETA 0:02  elapsed 0:02\n"
	if got := buf.String(); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

func TestUnit(t *testing.T) {
	var buf bytes.Buffer
	p := New(&buf, "eval", 4, 0)
	p.SetUnit("batch")
	at := fakeClock(p)
	at(3 * time.Second)
	p.Log(1, Field{Name: "succeeded", Value: 2, Format: "%.0f"})
	if got, want := buf.String(), "eval batch 1/4  succeeded 2  3.00 s/batch  ETA 0:09  elapsed 0:03\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestNilWriter(t *testing.T) {
	p := New(nil, "eval", 3, 0)
	p.Step(1)
	p.Log(2)
	p.Printf("x")
	p.Done()
}
