package grpo

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:staticcheck
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// isGolden is testdata/is_golden.json, written by is_golden.py: TRL's importance-sampling correction
// (ratios per mode, sampling/* metrics, and the loss with the ratio applied) computed by PyTorch.
type isGolden struct {
	Inputs struct {
		LogP            [][]float64 `json:"logp"`
		SamplingLogP    [][]float64 `json:"sampling_logp"`
		Mask            [][]float64 `json:"mask"`
		Advantages      []float64   `json:"advantages"`
		NumItemsInBatch float64     `json:"num_items_in_batch"`
	} `json:"inputs"`
	Cases []struct {
		Mode    string             `json:"mode"`
		ClipMin *float64           `json:"clip_min"`
		ClipMax *float64           `json:"clip_max"`
		Ratio   [][]float64        `json:"ratio"`
		Metrics map[string]float64 `json:"metrics"`
		Losses  map[string]struct {
			Loss float64     `json:"loss"`
			Grad [][]float64 `json:"grad"`
		} `json:"losses"`
	} `json:"cases"`
}

func f32(rows [][]float64) []float32 {
	var out []float32
	for _, r := range rows {
		for _, v := range r {
			out = append(out, float32(v))
		}
	}
	return out
}

// TestImportanceSamplingMatchesTRL: for the four vllm_importance_sampling_mode values and three
// (clip_min, clip_max) pairs, Config.ImportanceSampling gives TRL's ratios and sampling/* metrics, and
// Loss with that ratio gives TRL's loss and gradient (grpo and dapo).
func TestImportanceSamplingMatchesTRL(t *testing.T) {
	data, err := os.ReadFile("testdata/is_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g isGolden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	in := g.Inputs
	batch, length := len(in.LogP), len(in.LogP[0])
	for _, c := range g.Cases {
		name := fmt.Sprintf("%s/min=%v/max=%v", c.Mode, deref(c.ClipMin), deref(c.ClipMax))
		t.Run(name, func(t *testing.T) {
			cfg := Default()
			cfg.VLLMImportanceSamplingMode = c.Mode
			cfg.VLLMImportanceSamplingClipMin, cfg.VLLMImportanceSamplingClipMax = c.ClipMin, c.ClipMax
			ratio, metrics := cfg.ImportanceSampling(f32(in.LogP), f32(in.SamplingLogP), f32(in.Mask), batch, length)
			// The log-probs go in as float32 (TRL's are float32 too): a ratio moves by their rounding.
			tol := float32Tol(maxAbs(in.LogP, in.SamplingLogP), length)
			want := flatten(c.Ratio)
			for i := range want {
				if !close64(float64(ratio[i]), want[i], tol) {
					t.Errorf("ratio[%d][%d] = %v, TRL %v", i/length, i%length, ratio[i], want[i])
				}
			}
			for k, w := range c.Metrics {
				if got, ok := metrics[k]; !ok || !close64(got, w, tol) {
					t.Errorf("%s = %v (present %v), TRL %v", k, got, ok, w)
				}
			}
			if len(metrics) != len(c.Metrics) {
				t.Errorf("metrics %v, TRL logs %v", metrics, c.Metrics)
			}
			// Inside the training graph, over two micro-batches: the same ratios and, merged, the same metrics.
			graphRatio, graphMetrics := importanceSamplingInGraph(t, &cfg, f32(in.LogP), f32(in.SamplingLogP), f32(in.Mask), batch, length)
			for i := range ratio {
				if graphRatio[i] != ratio[i] {
					t.Errorf("in the graph: ratio[%d][%d] = %v, ImportanceSampling %v", i/length, i%length, graphRatio[i], ratio[i])
				}
			}
			for k, w := range metrics {
				if got, ok := graphMetrics[k]; !ok || !close64(got, w, 1e-12) {
					t.Errorf("in the graph: %s = %v (present %v), ImportanceSampling %v", k, got, ok, w)
				}
			}
			if len(graphMetrics) != len(metrics) {
				t.Errorf("in the graph: metrics %v, ImportanceSampling %v", graphMetrics, metrics)
			}
			for _, lt := range []string{LossGRPO, LossDAPO} {
				w := c.Losses[lt]
				loss, grad := lossWithRatio(t, lt, in.LogP, in.Mask, in.Advantages, c.Ratio, in.NumItemsInBatch)
				if !close64(loss, w.Loss, 1e-12) {
					t.Errorf("%s loss = %v, TRL %v", lt, loss, w.Loss)
				}
				for i, wg := range flatten(w.Grad) {
					if !close64(grad[i], wg, 1e-12) {
						t.Errorf("%s grad[%d] = %v, TRL %v", lt, i, grad[i], wg)
					}
				}
			}
		})
	}
}

// importanceSamplingInGraph runs importanceSamplingGraph on the first rows and on the rest as two micro-batches
// and returns the ratios and the merged metrics.
func importanceSamplingInGraph(t *testing.T, cfg *Config, old, sampling, mask []float32, batch, length int) ([]float32, map[string]float64) {
	t.Helper()
	exec, err := NewExec(testBackend(), func(o, s, m *Node) []*Node {
		r, sums := cfg.importanceSamplingGraph(o, s, m)
		return append([]*Node{r}, sums...)
	})
	if err != nil {
		t.Fatal(err)
	}
	var ratio []float32
	var sums isSums
	for k, rows := range [][2]int{{0, batch / 2}, {batch / 2, batch}} {
		part := func(x []float32) *tensors.Tensor {
			return tensors.FromFlatDataAndDimensions(append([]float32(nil), x[rows[0]*length:rows[1]*length]...), rows[1]-rows[0], length)
		}
		outs, err := exec.Exec(part(old), part(sampling), part(mask))
		if err != nil {
			t.Fatal(err)
		}
		ratio = append(ratio, tensors.MustCopyFlatData[float32](outs[0])...)
		v := make([]float64, isSumsCount)
		for i := range v {
			v[i] = tensors.ToScalar[float64](outs[1+i])
		}
		if k == 0 {
			sums = newISSums(v)
		} else {
			sums.add(newISSums(v))
		}
	}
	return ratio, sums.metrics()
}

func deref(p *float64) any {
	if p == nil {
		return "None"
	}
	return *p
}

// lossWithRatio runs Loss (float64, token level, epsilon 0.2/0.28, no old log-probs) with an
// importance-sampling ratio and returns the loss and d loss/d logp.
func lossWithRatio(t *testing.T, lossType string, logp, mask [][]float64, adv []float64, ratio [][]float64, numItems float64) (float64, []float64) {
	t.Helper()
	cfg := LossConfig{LossType: lossType, ImportanceSamplingLevel: LevelToken, Epsilon: 0.2, EpsilonHigh: 0.28,
		GradientAccumulationSteps: 1}
	exec, err := NewExec(testBackend(), func(lp, m, a, r, n *Node) []*Node {
		out, err := Loss(cfg, LossInputs{LogP: lp, Mask: m, Advantages: a, ImportanceSamplingRatio: r, NumItemsInBatch: n})
		if err != nil {
			t.Fatal(err)
		}
		return []*Node{out.Loss, Gradient(out.Loss, lp)[0]}
	})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := exec.Exec(matrix(logp), matrix(mask), tensors.FromFlatDataAndDimensions(adv, len(adv)), matrix(ratio), numItems)
	if err != nil {
		t.Fatal(err)
	}
	return asF64(outs[0])[0], asF64(outs[1])
}

// The config keys load under TRL's names, with TRL's defaults, the deprecated cap as the clip max, null
// as None, and TRL's __post_init__ checks.
func TestImportanceSamplingConfig(t *testing.T) {
	d := Default()
	if !d.VLLMImportanceSamplingCorrection || d.VLLMImportanceSamplingMode != ISSequenceMask ||
		d.VLLMImportanceSamplingClipMax == nil || *d.VLLMImportanceSamplingClipMax != 3 || d.VLLMImportanceSamplingClipMin != nil {
		t.Errorf("defaults: correction %v, mode %q, clip max %v, clip min %v; TRL: true, sequence_mask, 3.0, None",
			d.VLLMImportanceSamplingCorrection, d.VLLMImportanceSamplingMode, deref(d.VLLMImportanceSamplingClipMax), deref(d.VLLMImportanceSamplingClipMin))
	}
	c, err := Parse([]byte("vllm_importance_sampling_mode: token_truncate\nvllm_importance_sampling_cap: 2.5\nvllm_importance_sampling_clip_min: 0.25\n"), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if *c.VLLMImportanceSamplingClipMax != 2.5 || *c.VLLMImportanceSamplingClipMin != 0.25 {
		t.Errorf("cap 2.5, clip_min 0.25: got clip max %v, min %v", *c.VLLMImportanceSamplingClipMax, *c.VLLMImportanceSamplingClipMin)
	}
	c, err = Parse([]byte("vllm_importance_sampling_clip_max: null\nvllm_importance_sampling_clip_min: 0.5\n"), "c.yaml")
	if err != nil || c.VLLMImportanceSamplingClipMax != nil {
		t.Errorf("clip_max null: %v, %v; want None", err, c)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"vllm_importance_sampling_mode: seq\n", `c.yaml:1: vllm_importance_sampling_mode "seq": must be`},
		{"vllm_importance_sampling_clip_min: 3\n", "c.yaml:1: vllm_importance_sampling_clip_min (3) must be less than vllm_importance_sampling_clip_max (3)"},
		{"vllm_importance_sampling_mode: token_truncate\nvllm_importance_sampling_clip_max: null\n", "c.yaml:1: at least one of vllm_importance_sampling_clip_min or vllm_importance_sampling_clip_max must be set"},
	} {
		_, err := Parse([]byte(tc.yaml), "c.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
