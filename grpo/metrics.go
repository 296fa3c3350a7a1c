package grpo

import (
	"math"
	"sort"
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
