package grpo

import "math"

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
