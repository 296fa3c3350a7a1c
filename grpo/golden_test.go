package grpo

import (
	"encoding/json"
	"math"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// num is a JSON number that may also be the string "NaN" (JSON has no NaN).
type num float64

func (n *num) UnmarshalJSON(b []byte) error {
	if string(b) == `"NaN"` {
		*n = num(math.NaN())
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	*n = num(f)
	return err
}

type goldenFile struct {
	Source     string `json:"source"`
	LossInputs struct {
		LogP            [][]float64 `json:"logp"`
		OldLogP         [][]float64 `json:"old_logp"`
		RefLogP         [][]float64 `json:"ref_logp"`
		Mask            [][]float64 `json:"mask"`
		Advantages      []float64   `json:"advantages"`
		NumItemsInBatch float64     `json:"num_items_in_batch"`
	} `json:"loss_inputs"`
	LossCases []struct {
		Name   string `json:"name"`
		Config struct {
			LossType                  string  `json:"loss_type"`
			ImportanceSamplingLevel   string  `json:"importance_sampling_level"`
			Beta                      float64 `json:"beta"`
			Epsilon                   float64 `json:"epsilon"`
			EpsilonHigh               float64 `json:"epsilon_high"`
			GradientAccumulationSteps int     `json:"gradient_accumulation_steps"`
			StepsPerGeneration        int     `json:"steps_per_generation"`
			UseBiasCorrectionKL       bool    `json:"use_bias_correction_kl"`
			MaxCompletionLength       int     `json:"max_completion_length"`
		} `json:"config"`
		UseOld  bool           `json:"use_old"`
		Loss    float64        `json:"loss"`
		Grad    [][]float64    `json:"grad"`
		Metrics map[string]num `json:"metrics"`
	} `json:"loss_cases"`
	AdvantageCases []struct {
		Name              string `json:"name"`
		Rewards           []num  `json:"rewards"`
		NumGenerations    int    `json:"num_generations"`
		ScaleRewards      string `json:"scale_rewards"`
		Advantages        []num  `json:"advantages"`
		FracRewardZeroStd num    `json:"frac_reward_zero_std"`
		Reward            num    `json:"reward"`
		RewardStd         num    `json:"reward_std"`
	} `json:"advantage_cases"`
}

var loadGolden = sync.OnceValues(func() (*goldenFile, error) {
	data, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		return nil, err
	}
	var g goldenFile
	if err := json.Unmarshal(data, &g); err != nil {
		return nil, err
	}
	return &g, nil
})

func golden(t *testing.T) *goldenFile {
	t.Helper()
	g, err := loadGolden()
	if err != nil {
		t.Fatalf("golden data: %v", err)
	}
	return g
}

// testBackend is GoMLX's pure-Go backend, shared by the tests. Ops run sequentially: simplego's
// parallel op scheduler has a data race (v0.26.0 exec.go reads results/numUsed unlocked) that -race
// reports, and these graphs are too small to gain from parallelism.
var testBackend = sync.OnceValue(func() backends.Backend {
	b, err := simplego.New("ops_sequential")
	if err != nil {
		panic(err)
	}
	return b
})

// flatten turns a nested JSON array of numbers into a flat []float64.
func flatten(v any) []float64 {
	switch x := v.(type) {
	case float64:
		return []float64{x}
	case []any:
		var out []float64
		for _, e := range x {
			out = append(out, flatten(e)...)
		}
		return out
	case [][]float64:
		var out []float64
		for _, r := range x {
			out = append(out, r...)
		}
		return out
	}
	panic("flatten: unexpected type")
}

func matrix(rows [][]float64) *tensors.Tensor {
	return tensors.FromFlatDataAndDimensions(flatten(rows), len(rows), len(rows[0]))
}

// eps32 is float32's machine epsilon, 2^-23.
const eps32 = 0x1p-23

// float32Tol is the relative tolerance (for close64) of a float32 computation against a float64 reference, over
// rows of n values whose inputs are at most m in magnitude: rounding each input to float32 moves it by eps32·m
// (and an exponential of differences of them by as much, relative), each of the few ops per value rounds by
// eps32, and a row's n values add up as a random walk. It scales with the inputs, not with a CPU's rounding.
func float32Tol(m float64, n int) float64 { return 8 * eps32 * (1 + m) * math.Sqrt(float64(n)) }

// maxAbs is the largest magnitude in rows.
func maxAbs(rows ...[][]float64) float64 {
	m := 0.0
	for _, r := range rows {
		for _, v := range flatten(r) {
			m = math.Max(m, math.Abs(v))
		}
	}
	return m
}

// close64 reports whether got is within tol of want, relative to max(1, |want|); NaN equals NaN.
func close64(got, want, tol float64) bool {
	if math.IsNaN(want) || math.IsNaN(got) {
		return math.IsNaN(want) && math.IsNaN(got)
	}
	return math.Abs(got-want) <= tol*math.Max(1, math.Abs(want))
}
