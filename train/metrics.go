package train

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
)

// LogWindow gathers what the transformers Trainer and TRL's GRPOTrainer log between two logging steps:
// TRL appends each metric once per micro-batch (or per generation batch for reward metrics) and logs
// the mean of the non-NaN values; the Trainer logs the mean step loss over the window (a step's loss is
// the sum of its micro-batch losses, which TRL already divided for accumulation), the last step's
// gradient norm, and the learning rate of the next update.
type LogWindow struct {
	metrics map[string][]float64
	lossSum float64
	steps   int
	grad    float64
	hasGrad bool
}

// NewLogWindow returns an empty window.
func NewLogWindow() *LogWindow { return &LogWindow{metrics: map[string][]float64{}} }

// Add records one value of a metric under TRL's key (e.g. "clip_ratio/low_mean", "reward").
func (w *LogWindow) Add(key string, v float64) { w.metrics[key] = append(w.metrics[key], v) }

// AddAll records one value of each metric.
func (w *LogWindow) AddAll(m map[string]float64) {
	for k, v := range m {
		w.Add(k, v)
	}
}

// AddStep records a finished optimizer step: its loss (the sum of its micro-batch losses) and its
// gradient norm before clipping.
func (w *LogWindow) AddStep(loss, gradNorm float64) {
	w.lossSum += loss
	w.steps++
	w.grad, w.hasGrad = gradNorm, true
}

// Flush returns the logs of the window and empties it: "loss" (mean step loss), "grad_norm" (the last
// step's), "learning_rate" (as given: the scheduled rate of the next update) and every metric's mean
// over its non-NaN values. A metric with no valid value is NaN (TRL logs None: write it as null).
func (w *LogWindow) Flush(learningRate float64) map[string]float64 {
	out := map[string]float64{"learning_rate": learningRate}
	if w.steps > 0 {
		out["loss"] = w.lossSum / float64(w.steps)
	}
	if w.hasGrad {
		out["grad_norm"] = w.grad
	}
	for k, vals := range w.metrics {
		sum, n := 0.0, 0
		for _, v := range vals {
			if !math.IsNaN(v) {
				sum += v
				n++
			}
		}
		if n == 0 {
			out[k] = math.NaN()
		} else {
			out[k] = sum / float64(n)
		}
	}
	w.metrics = map[string][]float64{}
	w.lossSum, w.steps, w.hasGrad = 0, 0, false
	return out
}

// Keys returns the metric keys recorded so far, sorted.
func (w *LogWindow) Keys() []string {
	keys := make([]string, 0, len(w.metrics))
	for k := range w.metrics {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// MetricsRecord turns a log window into a JSON-ready record (NaN as null).
func MetricsRecord(logs map[string]float64) map[string]any {
	rec := make(map[string]any, len(logs))
	for k, v := range logs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			rec[k] = nil
		} else {
			rec[k] = v
		}
	}
	if s, ok := logs["step"]; ok {
		rec["step"] = int(s)
	}
	return rec
}

// MetricsFile appends one JSON object per logging step to metrics.jsonl.
type MetricsFile struct{ f *os.File }

// OpenMetrics opens metrics.jsonl for appending, first dropping the lines of
// steps after `keep` (a resumed run rewrites what it redoes).
func OpenMetrics(path string, keep int) (*MetricsFile, error) {
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	var kept []byte
	for _, line := range strings.SplitAfter(string(data), "\n") {
		var rec struct {
			Step int `json:"step"`
		}
		if strings.TrimSpace(line) == "" || json.Unmarshal([]byte(line), &rec) != nil || !strings.HasSuffix(line, "\n") {
			continue
		}
		if rec.Step <= keep {
			kept = append(kept, line...)
		}
	}
	if err := os.WriteFile(path, kept, 0o644); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return &MetricsFile{f: f}, nil
}

// Write appends one record.
func (m *MetricsFile) Write(rec map[string]any) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if _, err := m.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// Close closes the file.
func (m *MetricsFile) Close() error { return m.f.Close() }
