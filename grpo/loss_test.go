package grpo

import (
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:staticcheck
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

type lossResult struct {
	loss    float64
	grad    []float64
	metrics map[string]float64
}

// runLoss builds Loss for cfg on the given inputs and returns the loss, d loss/d logp and the metrics.
// Inputs: logp, old (nil: no OldLogP), ref, mask, adv, numItems.
func runLoss(t *testing.T, cfg LossConfig, dtype dtypes.DType, logp, old, ref, mask, adv *tensors.Tensor, numItems float64) lossResult {
	t.Helper()
	var names []string
	fn := func(ins []*Node) []*Node {
		in := LossInputs{LogP: ins[0], RefLogP: ins[2], Mask: ins[3], Advantages: ins[4], NumItemsInBatch: ins[5]}
		if old != nil {
			in.OldLogP = ins[1]
		}
		out, err := Loss(cfg, in)
		if err != nil {
			t.Fatalf("Loss: %v", err)
		}
		grad := Gradient(out.Loss, ins[0])[0]
		res := []*Node{out.Loss, grad}
		m := out.Metrics()
		names = names[:0]
		for k := range m {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			res = append(res, m[k])
		}
		return res
	}
	exec, err := NewExecAny(testBackend(), fn)
	if err != nil {
		t.Fatal(err)
	}
	if old == nil {
		old = logp
	}
	n := tensors.FromScalar(numItems)
	if dtype == dtypes.Float32 {
		logp, old, ref, adv = toF32(logp), toF32(old), toF32(ref), toF32(adv)
		n = tensors.FromScalar(float32(numItems))
	}
	outs, err := exec.Exec(logp, old, ref, mask, adv, n)
	if err != nil {
		t.Fatal(err)
	}
	r := lossResult{metrics: map[string]float64{}}
	r.loss = asF64(outs[0])[0]
	r.grad = asF64(outs[1])
	for i, k := range names {
		r.metrics[k] = asF64(outs[2+i])[0]
	}
	return r
}

func toF32(x *tensors.Tensor) *tensors.Tensor {
	v := tensors.MustCopyFlatData[float64](x)
	f := make([]float32, len(v))
	for i := range v {
		f[i] = float32(v[i])
	}
	return tensors.FromFlatDataAndDimensions(f, x.Shape().Dimensions...)
}

func asF64(x *tensors.Tensor) []float64 {
	if x.DType() == dtypes.Float32 {
		v := tensors.MustCopyFlatData[float32](x)
		out := make([]float64, len(v))
		for i := range v {
			out[i] = float64(v[i])
		}
		return out
	}
	return tensors.MustCopyFlatData[float64](x)
}

func goldenLossConfig(c *goldenFile, i int) LossConfig {
	gc := c.LossCases[i].Config
	return LossConfig{
		LossType: gc.LossType, ImportanceSamplingLevel: gc.ImportanceSamplingLevel,
		Epsilon: gc.Epsilon, EpsilonHigh: gc.EpsilonHigh, Beta: gc.Beta,
		MaxCompletionLength: gc.MaxCompletionLength, GradientAccumulationSteps: gc.GradientAccumulationSteps,
		StepsPerGeneration: gc.StepsPerGeneration, BiasCorrectionKL: gc.UseBiasCorrectionKL,
	}
}

// TestLossMatchesTRL checks the loss, its gradient w.r.t. logp and TRL's metrics against TRL's own
// GRPOTrainer._compute_loss and torch autograd (testdata/golden.py), for the four loss types, both
// importance-sampling levels, with and without beta, epsilon_high != epsilon, gradient accumulation,
// steps_per_generation != gradient_accumulation_steps (dapo) and mask zeros (padding, a tool
// observation, a fully masked completion).
func TestLossMatchesTRL(t *testing.T) {
	g := golden(t)
	in := g.LossInputs
	logp, old, ref, mask := matrix(in.LogP), matrix(in.OldLogP), matrix(in.RefLogP), matrix(in.Mask)
	adv := tensors.FromFlatDataAndDimensions(in.Advantages, len(in.Advantages))
	maskFlat := flatten(in.Mask)
	if len(g.LossCases) < 64 {
		t.Fatalf("golden file has %d loss cases, want all combinations", len(g.LossCases))
	}
	for i, c := range g.LossCases {
		t.Run(c.Name, func(t *testing.T) {
			o := old
			if !c.UseOld {
				o = nil
			}
			r := runLoss(t, goldenLossConfig(g, i), dtypes.Float64, logp, o, ref, mask, adv, in.NumItemsInBatch)
			const tol = 1e-9
			if !close64(r.loss, c.Loss, tol) {
				t.Errorf("loss = %.15g, TRL %.15g", r.loss, c.Loss)
			}
			want := flatten(c.Grad)
			for j := range want {
				if !close64(r.grad[j], want[j], tol) {
					t.Errorf("grad[%d] = %.15g, torch autograd %.15g", j, r.grad[j], want[j])
				}
				if maskFlat[j] == 0 && r.grad[j] != 0 {
					t.Errorf("grad[%d] = %g at a mask-0 position, want exactly 0", j, r.grad[j])
				}
			}
			if len(r.metrics) != len(c.Metrics) {
				t.Errorf("metrics %v, TRL logs %v", r.metrics, c.Metrics)
			}
			for k, w := range c.Metrics {
				got, ok := r.metrics[k]
				// TRL takes its clip ratios through float32 (.float()): within 1e-6 of the exact fractions.
				if !ok || !close64(got, float64(w), 1e-6) {
					t.Errorf("metric %s = %v, TRL %v", k, got, float64(w))
				}
			}
		})
	}
}

// TestLossFloat32 runs the same golden cases in float32 (the training dtype), within float32Tol of TRL's float64
// (inputs up to |logp|, |old|, |ref|, |advantage| in magnitude, rows of the batch's length).
func TestLossFloat32(t *testing.T) {
	g := golden(t)
	in := g.LossInputs
	logp, old, ref, mask := matrix(in.LogP), matrix(in.OldLogP), matrix(in.RefLogP), matrix(in.Mask)
	adv := tensors.FromFlatDataAndDimensions(in.Advantages, len(in.Advantages))
	tol := float32Tol(maxAbs(in.LogP, in.OldLogP, in.RefLogP, [][]float64{in.Advantages}), len(in.LogP[0]))
	t.Logf("tolerance %.3g", tol)
	for i, c := range g.LossCases {
		if !strings.Contains(c.Name, "ga=1") {
			continue
		}
		r := runLoss(t, goldenLossConfig(g, i), dtypes.Float32, logp, old, ref, toF32(mask), adv, in.NumItemsInBatch)
		if !close64(r.loss, c.Loss, tol) {
			t.Errorf("%s: float32 loss = %.8g, TRL %.8g", c.Name, r.loss, c.Loss)
		}
		for j, w := range flatten(c.Grad) {
			if !close64(r.grad[j], w, tol) {
				t.Errorf("%s: float32 grad[%d] = %.8g, torch %.8g", c.Name, j, r.grad[j], w)
			}
		}
	}
}

// TestLossIgnoresGarbageUnderMask puts -Inf and huge values where the mask is 0 (padding may hold
// anything): the loss, gradient and metrics must not change and the gradient there stays exactly 0.
func TestLossIgnoresGarbageUnderMask(t *testing.T) {
	g := golden(t)
	in := g.LossInputs
	dirty := func(rows [][]float64, v float64) *tensors.Tensor {
		out := make([][]float64, len(rows))
		for b := range rows {
			out[b] = append([]float64(nil), rows[b]...)
			for j := range out[b] {
				if in.Mask[b][j] == 0 {
					out[b][j] = v
				}
			}
		}
		return matrix(out)
	}
	adv := tensors.FromFlatDataAndDimensions(in.Advantages, len(in.Advantages))
	mask := matrix(in.Mask)
	for i, c := range g.LossCases {
		if !strings.Contains(c.Name, "beta=0.04") || !strings.Contains(c.Name, "ga=1") {
			continue
		}
		r := runLoss(t, goldenLossConfig(g, i), dtypes.Float64,
			dirty(in.LogP, math.Inf(-1)), dirty(in.OldLogP, 1e300), dirty(in.RefLogP, math.NaN()), mask, adv, in.NumItemsInBatch)
		if !close64(r.loss, c.Loss, 1e-9) {
			t.Errorf("%s: loss with garbage under the mask = %v, want %v", c.Name, r.loss, c.Loss)
		}
		for j, w := range flatten(c.Grad) {
			if !close64(r.grad[j], w, 1e-9) {
				t.Errorf("%s: grad[%d] = %v, want %v", c.Name, j, r.grad[j], w)
			}
		}
		for k, w := range c.Metrics {
			if !close64(r.metrics[k], float64(w), 1e-6) {
				t.Errorf("%s: metric %s = %v, want %v", c.Name, k, r.metrics[k], float64(w))
			}
		}
	}
}

// TestLossGradientAccumulation: with dapo, summing the micro-batch losses of a generation batch (each
// normalised by the batch's token count) equals the loss of the whole batch in one piece, the property
// behind TRL's num_items_in_batch; with grpo, GA micro-batches of one sequence each sum to the mean.
func TestLossGradientAccumulation(t *testing.T) {
	g := golden(t)
	in := g.LossInputs
	adv := tensors.FromFlatDataAndDimensions(in.Advantages, len(in.Advantages))
	total := 0.0
	for _, row := range in.Mask {
		for _, m := range row {
			total += m
		}
	}
	cfg := LossConfig{LossType: LossDAPO, ImportanceSamplingLevel: LevelToken, Epsilon: 0.2, EpsilonHigh: 0.28,
		Beta: 0.04, GradientAccumulationSteps: 3}
	whole := runLoss(t, cfg, dtypes.Float64, matrix(in.LogP), matrix(in.OldLogP), matrix(in.RefLogP), matrix(in.Mask), adv, total)
	sum := 0.0
	B := len(in.LogP)
	for lo := 0; lo < B; lo += 2 {
		hi := min(lo+2, B)
		part := tensors.FromFlatDataAndDimensions(in.Advantages[lo:hi], hi-lo)
		r := runLoss(t, cfg, dtypes.Float64, matrix(in.LogP[lo:hi]), matrix(in.OldLogP[lo:hi]), matrix(in.RefLogP[lo:hi]),
			matrix(in.Mask[lo:hi]), part, total)
		sum += r.loss
	}
	if !close64(sum, whole.loss, 1e-12) {
		t.Errorf("dapo: sum of micro-batch losses %v != whole-batch loss %v", sum, whole.loss)
	}

	cfg.LossType, cfg.GradientAccumulationSteps = LossGRPO, B
	wholeCfg := cfg
	wholeCfg.GradientAccumulationSteps = 1
	whole = runLoss(t, wholeCfg, dtypes.Float64, matrix(in.LogP), matrix(in.OldLogP), matrix(in.RefLogP), matrix(in.Mask), adv, total)
	sum = 0
	for b := 0; b < B; b++ {
		part := tensors.FromFlatDataAndDimensions(in.Advantages[b:b+1], 1)
		r := runLoss(t, cfg, dtypes.Float64, matrix(in.LogP[b:b+1]), matrix(in.OldLogP[b:b+1]), matrix(in.RefLogP[b:b+1]),
			matrix(in.Mask[b:b+1]), part, total)
		sum += r.loss
	}
	if !close64(sum, whole.loss, 1e-12) {
		t.Errorf("grpo: sum of %d accumulated single-sequence losses %v != batch loss %v", B, sum, whole.loss)
	}
}

func TestLossErrors(t *testing.T) {
	g := NewGraph(testBackend(), "errors")
	x := Parameter(g, "logp", tensors.FromScalarAndDimensions(0.0, 2, 3).Shape())
	mask := OnesLike(x)
	adv := Parameter(g, "adv", tensors.FromScalarAndDimensions(0.0, 2).Shape())
	base := LossConfig{LossType: LossDAPO, ImportanceSamplingLevel: LevelToken, Epsilon: 0.2, EpsilonHigh: 0.2, GradientAccumulationSteps: 1}
	cases := []struct {
		name string
		cfg  func(LossConfig) LossConfig
		in   LossInputs
		want string
	}{
		{"dapo without num_items", nil, LossInputs{LogP: x, Mask: mask, Advantages: adv}, "NumItemsInBatch"},
		{"beta without ref", func(c LossConfig) LossConfig { c.Beta = 0.1; c.LossType = LossGRPO; return c },
			LossInputs{LogP: x, Mask: mask, Advantages: adv}, "RefLogP"},
		{"bad advantages", func(c LossConfig) LossConfig { c.LossType = LossBNPO; return c },
			LossInputs{LogP: x, Mask: mask, Advantages: x}, "Advantages"},
		{"unknown loss", func(c LossConfig) LossConfig { c.LossType = "cispo"; return c },
			LossInputs{LogP: x, Mask: mask, Advantages: adv}, "cispo"},
		{"unknown level", func(c LossConfig) LossConfig { c.ImportanceSamplingLevel = "tok"; return c },
			LossInputs{LogP: x, Mask: mask, Advantages: adv}, "tok"},
	}
	for _, c := range cases {
		cfg := base
		if c.cfg != nil {
			cfg = c.cfg(cfg)
		}
		_, err := Loss(cfg, c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}
