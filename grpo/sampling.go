package grpo

import (
	"math"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:staticcheck // GoMLX graph code reads best with the dot import.
)

// ImportanceSampling is TRL's importance-sampling correction of the gap between the log-probs a sampler
// reported and the trainer's recomputation of them (GRPOTrainer._generate_and_score_completions with
// vllm_importance_sampling_correction). For batch completions of length tokens each, laid out flat
// ([batch*length]): old holds the trainer's log-probs, sampling the sampler's, mask the loss mask.
//
//	token modes:    rho_t = exp((old_t - sampling_t) * mask_t)
//	sequence modes: rho   = exp(sum_t (old_t - sampling_t) * mask_t), one per sequence
//	*_truncate: rho = clamp(rho, clip_min, clip_max);  *_mask: rho = 0 where rho < clip_min or rho > clip_max
//
// The returned ratio is [batch*length]: the loss multiplies each token's policy loss by it (sequence
// modes repeat the sequence's ratio on every token). The metrics are TRL's:
// sampling/sampling_logp_difference/mean|max (|old - sampling| over mask tokens) and
// sampling/importance_sampling_ratio/min|mean|max (over mask tokens, or over sequences in sequence modes;
// 0 when there is none).
func (c *Config) ImportanceSampling(old, sampling, mask []float32, batch, length int) (ratio []float32, metrics map[string]float64) {
	lo, hi := math.Inf(-1), math.Inf(1)
	if c.VLLMImportanceSamplingClipMin != nil {
		lo = *c.VLLMImportanceSamplingClipMin
	}
	if c.VLLMImportanceSamplingClipMax != nil {
		hi = *c.VLLMImportanceSamplingClipMax
	}
	constrain := func(r float64) float64 {
		switch c.VLLMImportanceSamplingMode {
		case ISTokenTruncate, ISSequenceTruncate:
			return min(max(r, lo), hi)
		default:
			if r < lo || r > hi {
				return 0
			}
			return r
		}
	}
	sequence := c.VLLMImportanceSamplingMode == ISSequenceTruncate || c.VLLMImportanceSamplingMode == ISSequenceMask
	ratio = make([]float32, batch*length)
	var deltaSum, deltaMax, n float64
	var flat []float64
	for b := 0; b < batch; b++ {
		row := b * length
		seqDiff := 0.0
		for t := 0; t < length; t++ {
			i := row + t
			if mask[i] == 0 {
				if !sequence {
					ratio[i] = float32(constrain(1)) // exp(0), as TRL's masked positions
				}
				continue
			}
			d := float64(old[i]) - float64(sampling[i])
			deltaSum += math.Abs(d)
			deltaMax = max(deltaMax, math.Abs(d))
			n++
			if sequence {
				seqDiff += d * float64(mask[i])
				continue
			}
			r := constrain(math.Exp(d * float64(mask[i])))
			ratio[i] = float32(r)
			flat = append(flat, r)
		}
		if sequence {
			r := constrain(math.Exp(seqDiff))
			for t := 0; t < length; t++ {
				ratio[row+t] = float32(r)
			}
			flat = append(flat, r)
		}
	}
	metrics = map[string]float64{
		"sampling/sampling_logp_difference/mean":  0,
		"sampling/sampling_logp_difference/max":   0,
		"sampling/importance_sampling_ratio/min":  0,
		"sampling/importance_sampling_ratio/mean": 0,
		"sampling/importance_sampling_ratio/max":  0,
	}
	if n > 0 {
		metrics["sampling/sampling_logp_difference/mean"] = deltaSum / n
		metrics["sampling/sampling_logp_difference/max"] = deltaMax
	}
	if len(flat) > 0 {
		lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
		for _, r := range flat {
			lo, hi, sum = min(lo, r), max(hi, r), sum+r
		}
		metrics["sampling/importance_sampling_ratio/min"] = lo
		metrics["sampling/importance_sampling_ratio/mean"] = sum / float64(len(flat))
		metrics["sampling/importance_sampling_ratio/max"] = hi
	}
	return ratio, metrics
}

// isSums are the per-micro-batch partial sums from which the importance-sampling metrics of a whole generation
// batch are assembled (importanceSamplingGraph's outputs, in this order).
type isSums struct {
	deltaSum, deltaMax, deltaN           float64 // |old - sampling| over loss tokens: sum, max, count
	ratioMin, ratioMax, ratioSum, ratioN float64
}

// add merges another micro-batch's sums.
func (s *isSums) add(o isSums) {
	s.deltaSum += o.deltaSum
	s.deltaMax = max(s.deltaMax, o.deltaMax)
	s.deltaN += o.deltaN
	s.ratioMin, s.ratioMax = min(s.ratioMin, o.ratioMin), max(s.ratioMax, o.ratioMax)
	s.ratioSum += o.ratioSum
	s.ratioN += o.ratioN
}

// newISSums reads importanceSamplingGraph's outputs.
func newISSums(v []float64) isSums {
	return isSums{deltaSum: v[0], deltaMax: v[1], deltaN: v[2], ratioMin: v[3], ratioMax: v[4], ratioSum: v[5], ratioN: v[6]}
}

// metrics are ImportanceSampling's metrics from the sums.
func (s *isSums) metrics() map[string]float64 {
	m := map[string]float64{
		"sampling/sampling_logp_difference/mean":  0,
		"sampling/sampling_logp_difference/max":   0,
		"sampling/importance_sampling_ratio/min":  0,
		"sampling/importance_sampling_ratio/mean": 0,
		"sampling/importance_sampling_ratio/max":  0,
	}
	if s.deltaN > 0 {
		m["sampling/sampling_logp_difference/mean"] = s.deltaSum / s.deltaN
		m["sampling/sampling_logp_difference/max"] = s.deltaMax
	}
	if s.ratioN > 0 {
		m["sampling/importance_sampling_ratio/min"] = s.ratioMin
		m["sampling/importance_sampling_ratio/mean"] = s.ratioSum / s.ratioN
		m["sampling/importance_sampling_ratio/max"] = s.ratioMax
	}
	return m
}

// isSumsCount is the number of importanceSamplingGraph's metric outputs.
const isSumsCount = 7

// importanceSamplingGraph is ImportanceSampling inside the training graph, for micro-batches whose old
// log-probs are the graph's own (the policy has not moved since sampling: num_iterations 1 and one optimizer
// step per generation batch), so that no separate forward pass computes them. old, sampling and mask are
// [B, T]; it returns the ratio [B, T] (old's dtype) and the isSums of this micro-batch as float64 scalars. It
// computes in float64 with ImportanceSampling's expressions.
func (c *Config) importanceSamplingGraph(old, sampling, mask *Node) (ratio *Node, sums []*Node) {
	g := old.Graph()
	f64 := func(x *Node) *Node { return ConvertDType(x, dtypes.Float64) }
	in := NotEqual(mask, ZerosLike(mask))
	zero := ScalarZero(g, dtypes.Float64)
	lo, hi := math.Inf(-1), math.Inf(1)
	if c.VLLMImportanceSamplingClipMin != nil {
		lo = *c.VLLMImportanceSamplingClipMin
	}
	if c.VLLMImportanceSamplingClipMax != nil {
		hi = *c.VLLMImportanceSamplingClipMax
	}
	loN, hiN := Scalar(g, dtypes.Float64, lo), Scalar(g, dtypes.Float64, hi)
	constrain := func(r *Node) *Node {
		switch c.VLLMImportanceSamplingMode {
		case ISTokenTruncate, ISSequenceTruncate:
			return Min(Max(r, loN), hiN)
		default:
			return Where(Or(LessThan(r, loN), GreaterThan(r, hiN)), ZerosLike(r), r)
		}
	}
	d := Where(in, Mul(Sub(f64(old), f64(sampling)), f64(mask)), ZerosLike(f64(old))) // (old - sampling) * mask on loss tokens
	absD := Abs(Where(in, Sub(f64(old), f64(sampling)), ZerosLike(d)))
	count := ReduceAllSum(ConvertDType(in, dtypes.Float64))
	sums = []*Node{ReduceAllSum(absD), Max(ReduceAllMax(absD), zero), count}
	inf, negInf := Scalar(g, dtypes.Float64, math.Inf(1)), Scalar(g, dtypes.Float64, math.Inf(-1))
	sequence := c.VLLMImportanceSamplingMode == ISSequenceTruncate || c.VLLMImportanceSamplingMode == ISSequenceMask
	var r *Node
	if sequence {
		perSeq := constrain(Exp(ReduceSum(d, -1))) // [B]
		r = BroadcastToDims(ExpandAxes(perSeq, -1), old.Shape().Dimensions...)
		sums = append(sums, ReduceAllMin(perSeq), ReduceAllMax(perSeq), ReduceAllSum(perSeq), Scalar(g, dtypes.Float64, float64(perSeq.Shape().Dim(0))))
	} else {
		r = constrain(Exp(d)) // exp(0) = 1 off the loss tokens, as TRL's masked positions
		sums = append(sums, ReduceAllMin(Where(in, r, BroadcastToDims(inf, r.Shape().Dimensions...))),
			ReduceAllMax(Where(in, r, BroadcastToDims(negInf, r.Shape().Dimensions...))),
			ReduceAllSum(Where(in, r, ZerosLike(r))), count)
	}
	return ConvertDType(r, old.DType()), sums
}

// importanceSampling is Config.ImportanceSampling over the sequences of gen
// whose micro-batches skip does not leave out (they have no old log-probs);
// the ratio of the others is 1 (no optimizer step reads it) and the metrics
// cover the rest.
func (gen *generation) importanceSampling(c *Config, sampling, mask []float32, skip func(mb int) bool) ([]float32, map[string]float64) {
	bs, n := c.PerDeviceTrainBatchSize, len(gen.trajs)
	var rows []int
	for b := range n {
		if !skip(b / bs) {
			rows = append(rows, b)
		}
	}
	if len(rows) == n {
		return c.ImportanceSampling(gen.old, sampling, mask, n, gen.length)
	}
	pick := func(all []float32) []float32 {
		out := make([]float32, 0, len(rows)*gen.length)
		for _, b := range rows {
			out = append(out, all[b*gen.length:(b+1)*gen.length]...)
		}
		return out
	}
	kept, metrics := c.ImportanceSampling(pick(gen.old), pick(sampling), pick(mask), len(rows), gen.length)
	ratio := make([]float32, n*gen.length)
	for i := range ratio {
		ratio[i] = 1
	}
	for k, b := range rows {
		copy(ratio[b*gen.length:(b+1)*gen.length], kept[k*gen.length:(k+1)*gen.length])
	}
	return ratio, metrics
}
