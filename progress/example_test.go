package progress_test

import (
	"os"

	"github.com/mcprl/mcprl/progress"
)

// A training loop reports every step and every logging step. On a terminal the bar is redrawn in place;
// redirected to a file, stderr gets one line per logging step, such as
//
//	train step 10/40  reward 0.612  loss 0.0123  0.41 s/step  ETA 0:12  elapsed 0:04
func Example() {
	const total, logEvery = 40, 10
	p := progress.New(os.Stderr, "train", total, 0)
	defer p.Done()
	for step := 1; step <= total; step++ {
		reward, loss := 0.612, 0.0123 // from the step
		fields := []progress.Field{progress.F("reward", reward), {Name: "loss", Value: loss, Format: "%.4f"}}
		p.Step(step, fields...)
		if step%logEvery == 0 {
			p.Log(step, fields...)
		}
	}
}
