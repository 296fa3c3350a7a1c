package grpo

import (
	"errors"
	"fmt"
	"math"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:staticcheck // GoMLX graph code reads best with the dot import, as GoMLX's own packages do.
)

// LossConfig holds the knobs of TRL's GRPOTrainer._compute_loss.
type LossConfig struct {
	LossType                string  // grpo, bnpo, dr_grpo or dapo
	ImportanceSamplingLevel string  // token or sequence (GSPO)
	Epsilon, EpsilonHigh    float64 // clip range [1-Epsilon, 1+EpsilonHigh]
	Beta                    float64 // KL coefficient; 0: no reference model
	// BiasCorrectionKL multiplies the per-token KL by the importance weight w (TRL's use_bias_correction_kl,
	// on by default there), gradient through w included.
	BiasCorrectionKL    bool
	MaxCompletionLength int // dr_grpo's constant normaliser
	// GradientAccumulationSteps is TRL's current_gradient_accumulation_steps: grpo, bnpo and dr_grpo
	// divide the micro-batch loss by it (use 1 in evaluation). dapo divides by NumItemsInBatch instead,
	// rescaled to one accumulation window: NumItemsInBatch * GradientAccumulationSteps / StepsPerGeneration.
	GradientAccumulationSteps int
	// StepsPerGeneration is TRL's steps_per_generation (the micro-batches one generation batch is split into);
	// 0 means GradientAccumulationSteps, TRL's default. Only dapo reads it.
	StepsPerGeneration int
}

// LossConfig returns the loss settings of c (GradientAccumulationSteps = gradient_accumulation_steps).
func (c *Config) LossConfig() LossConfig {
	_, spg, err := c.Generation()
	if err != nil {
		spg = 0 // Validate reports it; the loss then uses TRL's default
	}
	return LossConfig{
		LossType:                  c.LossType,
		ImportanceSamplingLevel:   c.ImportanceSamplingLevel,
		Epsilon:                   c.Epsilon,
		EpsilonHigh:               c.EffectiveEpsilonHigh(),
		Beta:                      c.Beta,
		BiasCorrectionKL:          c.UseBiasCorrectionKL,
		MaxCompletionLength:       c.MaxCompletionLength,
		GradientAccumulationSteps: c.GradientAccumulationSteps,
		StepsPerGeneration:        spg,
	}
}

// LossInputs are the graph nodes of one micro-batch of B completions padded to T tokens.
type LossInputs struct {
	// LogP [B, T]: log-probabilities of the completion tokens under the current policy. Gradients flow
	// through it.
	LogP *Node
	// OldLogP [B, T]: log-probabilities when the completions were sampled. nil: the policy has not moved
	// since (num_iterations 1), and TRL then uses LogP detached, making every ratio exactly 1.
	OldLogP *Node
	// RefLogP [B, T]: the frozen reference model's log-probabilities; required when Beta != 0.
	RefLogP *Node
	// Mask [B, T]: 1 where the policy sampled the token, 0 for tool output, padding and truncated
	// completions (TRL's completion_mask * tool_mask). Any numeric or bool dtype.
	Mask *Node
	// Advantages [B].
	Advantages *Node
	// NumItemsInBatch (scalar): for dapo, the number of mask-1 tokens in the whole generation batch
	// (all gradient-accumulation micro-batches of the step), TRL's num_items_in_batch. Ignored otherwise.
	NumItemsInBatch *Node
	// Entropies [B, T] (optional): per-token entropies, for the "entropy" metric.
	Entropies *Node
	// ImportanceSamplingRatio [B, T] (optional): TRL's vllm_importance_sampling_ratio, the correction for
	// the gap between the sampler's and the trainer's log-probs (see Config.ImportanceSampling). Each
	// token's policy loss is multiplied by it, before the KL term is added.
	ImportanceSamplingRatio *Node
}

// LossOutputs is the loss to differentiate and the per-micro-batch metrics TRL logs (TRL averages each
// over the micro-batches of a logging window).
type LossOutputs struct {
	Loss *Node // scalar: what to differentiate, already divided as TRL does
	// KL is the masked mean of the per-token k3 KL ("kl"); nil when Beta == 0.
	KL *Node
	// Entropy is the masked mean of Entropies ("entropy"); nil without Entropies.
	Entropy *Node
	// Clip ratios: fractions of tokens (of sequences at sequence level) whose ratio was clipped below
	// with a negative advantage, above with a positive one, and either ("clip_ratio/low_mean",
	// "clip_ratio/high_mean", "clip_ratio/region_mean"); LowMin and HighMax are the min and max over
	// sequences of the per-sequence fractions ("clip_ratio/low_min", "clip_ratio/high_max").
	ClipRatioLowMean, ClipRatioHighMean, ClipRatioRegionMean, ClipRatioLowMin, ClipRatioHighMax *Node
}

// Metrics returns the metric nodes under TRL's log keys.
func (o *LossOutputs) Metrics() map[string]*Node {
	m := map[string]*Node{
		"clip_ratio/low_mean":    o.ClipRatioLowMean,
		"clip_ratio/high_mean":   o.ClipRatioHighMean,
		"clip_ratio/region_mean": o.ClipRatioRegionMean,
		"clip_ratio/low_min":     o.ClipRatioLowMin,
		"clip_ratio/high_max":    o.ClipRatioHighMax,
	}
	if o.KL != nil {
		m["kl"] = o.KL
	}
	if o.Entropy != nil {
		m["entropy"] = o.Entropy
	}
	return m
}

func (c LossConfig) validate() error {
	var errs []error
	switch c.LossType {
	case LossGRPO, LossBNPO, LossDrGRPO, LossDAPO:
	default:
		errs = append(errs, fmt.Errorf("loss_type %q: must be grpo, bnpo, dr_grpo or dapo", c.LossType))
	}
	switch c.ImportanceSamplingLevel {
	case LevelToken, LevelSequence:
	default:
		errs = append(errs, fmt.Errorf("importance_sampling_level %q: must be token or sequence", c.ImportanceSamplingLevel))
	}
	if c.LossType == LossDrGRPO && c.MaxCompletionLength < 1 {
		errs = append(errs, fmt.Errorf("dr_grpo needs max_completion_length >= 1, got %d", c.MaxCompletionLength))
	}
	if c.StepsPerGeneration < 0 {
		errs = append(errs, fmt.Errorf("steps_per_generation must be >= 1, got %d", c.StepsPerGeneration))
	}
	if c.GradientAccumulationSteps < 1 {
		errs = append(errs, fmt.Errorf("gradient_accumulation_steps must be >= 1, got %d", c.GradientAccumulationSteps))
	}
	if math.IsNaN(c.Epsilon) || math.IsNaN(c.EpsilonHigh) || math.IsNaN(c.Beta) {
		errs = append(errs, errors.New("epsilon, epsilon_high and beta must be numbers"))
	}
	return errors.Join(errs...)
}

// Loss builds TRL's GRPO loss for one micro-batch (GRPOTrainer._compute_loss), for the loss types
// grpo, bnpo, dr_grpo and dapo:
//
//	log_ratio = logp - old_logp;  token level: w = exp(log_ratio);
//	sequence level (GSPO): w = exp(sum(log_ratio*mask)/max(sum(mask),1)) per sequence;
//	l_t = -min(w*A, clamp(w, 1-epsilon, 1+epsilon_high)*A) * rho_t + beta*(exp(ref-logp) - (ref-logp) - 1)
//	grpo:    mean_b(sum_t m*l / max(sum_t m, 1)) / gradient_accumulation_steps
//	bnpo:    sum m*l / max(sum m, 1) / gradient_accumulation_steps
//	dr_grpo: sum m*l / (B * max_completion_length) / gradient_accumulation_steps
//	dapo:    sum m*l / (max(num_items_in_batch, 1) * gradient_accumulation_steps / steps_per_generation)
//
// where rho_t is the importance-sampling correction (1 when ImportanceSamplingRatio is nil).
// Summing the gradients of the micro-batches of a step (not averaging them) gives TRL's step gradient.
// Positions with mask 0 are replaced by 0 before any arithmetic, so their gradient is exactly zero and
// padding may hold anything (even -Inf). At the clip boundary and inside the clip range the gradient
// is that of w*A, as torch's min/clamp give; outside it, zero.
func Loss(cfg LossConfig, in LossInputs) (out *LossOutputs, err error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("grpo loss: %w", err)
	}
	if err := checkLossShapes(cfg, in); err != nil {
		return nil, fmt.Errorf("grpo loss: %w", err)
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("grpo loss: building the graph: %v", r)
		}
	}()
	logp0 := in.LogP
	dtype := logp0.DType()
	dims := logp0.Shape().Dimensions
	batch := dims[0]
	mask := in.Mask
	if mask.DType() != dtype {
		mask = ConvertDType(mask, dtype)
	}
	valid := GreaterThan(mask, ZerosLike(mask))
	zeros := ZerosLike(logp0)
	logp := Where(valid, logp0, zeros)
	var old *Node
	if in.OldLogP == nil {
		old = StopGradient(logp)
	} else {
		old = Where(valid, StopGradient(convertTo(in.OldLogP, dtype)), zeros)
	}
	adv := ExpandAxes(convertTo(in.Advantages, dtype), -1) // [B, 1]

	logRatio := Sub(logp, old)
	var logW *Node
	if cfg.ImportanceSamplingLevel == LevelToken {
		logW = logRatio // [B, T]
	} else {
		seqTokens := MaxScalar(ReduceSum(mask, 1), 1.0)
		logW = ExpandAxes(Div(ReduceSum(Mul(logRatio, mask), 1), seqTokens), -1) // [B, 1]
	}
	coef1 := Exp(logW)
	lo, hi := 1-cfg.Epsilon, 1+cfg.EpsilonHigh
	advB := BroadcastToShape(adv, coef1.Shape())
	zeroW := ZerosLike(coef1)
	isLow := LogicalAnd(LessThan(coef1, AddScalar(zeroW, lo)), LessThan(advB, zeroW))
	isHigh := LogicalAnd(GreaterThan(coef1, AddScalar(zeroW, hi)), GreaterThan(advB, zeroW))
	isRegion := LogicalOr(isLow, isHigh)
	coef2 := Clamp(AddScalar(zeroW, lo), coef1, AddScalar(zeroW, hi))
	// -min(w*A, clip(w)*A): the clipped term is the minimum exactly where isRegion holds; elsewhere
	// the two terms are equal or w*A is the smaller.
	perTokenLoss := Neg(Where(isRegion, Mul(StopGradient(coef2), advB), Mul(coef1, advB)))
	perTokenLoss = BroadcastToShape(perTokenLoss, logp.Shape()) // [B, T]
	if in.ImportanceSamplingRatio != nil {
		perTokenLoss = Mul(perTokenLoss, StopGradient(convertTo(in.ImportanceSamplingRatio, dtype)))
	}

	out = &LossOutputs{}
	if cfg.Beta != 0 {
		if in.RefLogP == nil {
			return nil, errors.New("grpo loss: beta != 0 needs RefLogP")
		}
		ref := Where(valid, StopGradient(convertTo(in.RefLogP, dtype)), zeros)
		d := Sub(ref, logp)
		kl := AddScalar(Sub(Exp(d), d), -1)
		if cfg.BiasCorrectionKL {
			kl = Mul(kl, BroadcastToShape(coef1, kl.Shape()))
		}
		perTokenLoss = Add(perTokenLoss, MulScalar(kl, cfg.Beta))
		out.KL = maskedMean(kl, mask)
	}

	masked := Mul(perTokenLoss, mask)
	ga := float64(cfg.GradientAccumulationSteps)
	var loss *Node
	switch cfg.LossType {
	case LossGRPO:
		perSeq := Div(ReduceSum(masked, 1), MaxScalar(ReduceSum(mask, 1), 1.0))
		loss = DivScalar(ReduceAllMean(perSeq), ga)
	case LossBNPO:
		loss = DivScalar(Div(ReduceAllSum(masked), MaxScalar(ReduceAllSum(mask), 1.0)), ga)
	case LossDrGRPO:
		loss = DivScalar(DivScalar(ReduceAllSum(masked), float64(batch*cfg.MaxCompletionLength)), ga)
	case LossDAPO:
		// TRL: normalizer = num_items_in_batch.clamp(min=1) * current_gradient_accumulation_steps / steps_per_generation.
		spg := cfg.StepsPerGeneration
		if spg == 0 {
			spg = cfg.GradientAccumulationSteps
		}
		n := MulScalar(MaxScalar(convertTo(in.NumItemsInBatch, dtype), 1.0), ga/float64(spg))
		loss = Div(ReduceAllSum(masked), n)
	}
	out.Loss = loss

	if in.Entropies != nil {
		out.Entropy = maskedMean(StopGradient(convertTo(in.Entropies, dtype)), mask)
	}
	low, high, region := ConvertDType(isLow, dtype), ConvertDType(isHigh, dtype), ConvertDType(isRegion, dtype)
	if cfg.ImportanceSamplingLevel == LevelToken {
		out.ClipRatioLowMean = maskedMean(low, mask)
		out.ClipRatioHighMean = maskedMean(high, mask)
		out.ClipRatioRegionMean = maskedMean(region, mask)
		seqTokens := ReduceSum(mask, 1)
		hasTokens := GreaterThan(seqTokens, ZerosLike(seqTokens))
		out.ClipRatioLowMin = nanReduce(Div(ReduceSum(Mul(low, mask), 1), seqTokens), hasTokens, false)
		out.ClipRatioHighMax = nanReduce(Div(ReduceSum(Mul(high, mask), 1), seqTokens), hasTokens, true)
	} else {
		// One value per sequence: TRL averages over sequences, mask or not.
		out.ClipRatioLowMean = ReduceAllMean(low)
		out.ClipRatioHighMean = ReduceAllMean(high)
		out.ClipRatioRegionMean = ReduceAllMean(region)
		all := Reshape(OnesLike(ReduceSum(low, 1)), batch)
		allValid := GreaterThan(all, ZerosLike(all))
		out.ClipRatioLowMin = nanReduce(Reshape(low, batch), allValid, false)
		out.ClipRatioHighMax = nanReduce(Reshape(high, batch), allValid, true)
	}
	return out, nil
}

func convertTo(x *Node, dtype dtypes.DType) *Node {
	if x.DType() != dtype {
		return ConvertDType(x, dtype)
	}
	return x
}

// maskedMean is TRL's global_masked_mean on one process: sum(x*mask) / max(sum(mask), 1).
func maskedMean(x, mask *Node) *Node {
	return Div(ReduceAllSum(Mul(x, mask)), MaxScalar(ReduceAllSum(mask), 1.0))
}

// nanReduce is TRL's nanmin (or nanmax) over the entries of v where valid holds; NaN if none does.
func nanReduce(v, valid *Node, isMax bool) *Node {
	fill := math.Inf(1)
	if isMax {
		fill = math.Inf(-1)
	}
	filled := Where(valid, v, AddScalar(ZerosLike(v), fill))
	var r *Node
	if isMax {
		r = ReduceAllMax(filled)
	} else {
		r = ReduceAllMin(filled)
	}
	anyValid := GreaterThan(ReduceAllSum(ConvertDType(valid, v.DType())), ScalarZero(v.Graph(), v.DType()))
	return Where(anyValid, r, AddScalar(ZerosLike(r), math.NaN()))
}

func checkLossShapes(cfg LossConfig, in LossInputs) error {
	if in.LogP == nil || in.Mask == nil || in.Advantages == nil {
		return errors.New("LogP, Mask and Advantages are required")
	}
	if !in.LogP.DType().IsFloat() {
		return fmt.Errorf("LogP must be a float tensor, got %s", in.LogP.DType())
	}
	s := in.LogP.Shape()
	if s.Rank() != 2 {
		return fmt.Errorf("LogP must be [B, T], got %s", s)
	}
	same := func(name string, n *Node) error {
		if n == nil {
			return nil
		}
		if !equalDims(n.Shape().Dimensions, s.Dimensions) {
			return fmt.Errorf("%s shape %v differs from LogP's %v", name, n.Shape().Dimensions, s.Dimensions)
		}
		return nil
	}
	if err := errors.Join(same("OldLogP", in.OldLogP), same("RefLogP", in.RefLogP), same("Mask", in.Mask),
		same("Entropies", in.Entropies), same("ImportanceSamplingRatio", in.ImportanceSamplingRatio)); err != nil {
		return err
	}
	if !equalDims(in.Advantages.Shape().Dimensions, s.Dimensions[:1]) {
		return fmt.Errorf("Advantages must be [B]=[%d], got %v", s.Dimensions[0], in.Advantages.Shape().Dimensions)
	}
	if cfg.Beta != 0 && in.RefLogP == nil {
		return errors.New("beta != 0 needs RefLogP (the reference model's log-probabilities)")
	}
	if cfg.LossType == LossDAPO && (in.NumItemsInBatch == nil || !in.NumItemsInBatch.Shape().IsScalar()) {
		return errors.New("dapo needs NumItemsInBatch, a scalar: the mask-1 tokens of the whole generation batch")
	}
	return nil
}

func equalDims(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
