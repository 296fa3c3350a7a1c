package train

import (
	"math"
	"testing"
)

func TestLogWindow(t *testing.T) {
	w := NewLogWindow()
	w.AddAll(map[string]float64{"clip_ratio/low_mean": 0.1, "kl": 0.02})
	w.Add("clip_ratio/low_mean", 0.3)
	w.Add("clip_ratio/low_min", math.NaN())
	w.Add("kl", math.NaN()) // NaN values are left out of the mean, as TRL's log()
	w.AddStep(0.5, 2.0)
	w.AddStep(0.25, 1.5)
	if k := w.Keys(); len(k) != 3 || k[0] != "clip_ratio/low_mean" {
		t.Errorf("Keys = %v", k)
	}
	logs := w.Flush(1e-5)
	want := map[string]float64{"clip_ratio/low_mean": 0.2, "kl": 0.02, "loss": 0.375, "grad_norm": 1.5, "learning_rate": 1e-5}
	for k, v := range want {
		if !close64(logs[k], v, 1e-15) {
			t.Errorf("%s = %v, want %v", k, logs[k], v)
		}
	}
	if !math.IsNaN(logs["clip_ratio/low_min"]) {
		t.Errorf("a metric with only NaN values: %v, want NaN (TRL's None)", logs["clip_ratio/low_min"])
	}
	if again := w.Flush(0); len(again) != 1 {
		t.Errorf("Flush did not empty the window: %v", again)
	}
}
