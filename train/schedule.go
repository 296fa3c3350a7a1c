package train

import (
	"fmt"
	"math"
)

// WarmupSteps is transformers' TrainingArguments.get_warmup_steps: warmupSteps when >= 1; a ratio of
// totalSteps when in (0, 1) (transformers v5's form); else ceil(totalSteps x warmupRatio).
func WarmupSteps(warmupSteps, warmupRatio float64, totalSteps int) int {
	switch {
	case warmupSteps >= 1:
		return int(warmupSteps)
	case warmupSteps > 0:
		return int(math.Ceil(float64(totalSteps) * warmupSteps))
	}
	return int(math.Ceil(float64(totalSteps) * warmupRatio))
}

// LRLambda is the multiplier of the base learning rate that transformers' schedulers
// (get_scheduler with torch's LambdaLR) apply after `step` optimizer steps (LambdaLR's last_epoch):
// the update number s (1-based) uses LRLambda(s-1).
//
//	linear:               warmup s/w, then max(0, (total-s)/max(1, total-w))
//	cosine:               warmup, then max(0, 0.5*(1+cos(pi*progress))), progress = (s-w)/max(1, total-w)
//	constant:             1
//	constant_with_warmup: warmup, then 1
func LRLambda(schedulerType string, step, warmupSteps, totalSteps int) (float64, error) {
	s, w, t := float64(step), float64(warmupSteps), float64(totalSteps)
	warm := func() float64 { return s / math.Max(1, w) }
	switch schedulerType {
	case SchedulerLinear:
		if step < warmupSteps {
			return warm(), nil
		}
		return math.Max(0, (t-s)/math.Max(1, t-w)), nil
	case SchedulerCosine:
		if step < warmupSteps {
			return warm(), nil
		}
		progress := (s - w) / math.Max(1, t-w)
		const numCycles = 0.5
		return math.Max(0, 0.5*(1+math.Cos(math.Pi*numCycles*2*progress))), nil
	case SchedulerConstant:
		return 1, nil
	case SchedulerConstantWithWarmup:
		if step < warmupSteps {
			return warm(), nil
		}
		return 1, nil
	}
	return 0, fmt.Errorf("lr_scheduler_type %q is not supported", schedulerType)
}

// LearningRateAt is the learning rate of the update that follows `step` completed optimizer steps
// (step 0 is the first update), for a run of totalSteps optimizer steps.
func (a *Arguments) LearningRateAt(step, totalSteps int) (float64, error) {
	f, err := LRLambda(a.LRSchedulerType, step, WarmupSteps(a.WarmupSteps, a.WarmupRatio, totalSteps), totalSteps)
	return a.LearningRate * f, err
}
