package tensorboard_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcprl/mcprl/tensorboard"
)

// A trainer opens one writer per run and writes its logs at each logging step under transformers'
// tag names ("train/" + the metric's key); `tensorboard --logdir DIR` shows the curves.
func Example() {
	dir, err := os.MkdirTemp("", "runs")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	w, err := tensorboard.Create(dir)
	if err != nil {
		log.Fatal(err)
	}
	for step, reward := range []float64{0.58, 0.66, 0.79} {
		if err := w.Scalars(int64(10*(step+1)), map[string]float64{"train/reward": reward}); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.HasPrefix(filepath.Base(w.Path()), "events.out.tfevents."))
	// Output: true
}
