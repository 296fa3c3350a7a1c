package main

import (
	"encoding/json"
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/model"
)

// newModelForwardCmd exposes the forward pass, so that other implementations (transformers, in python/tests)
// can be compared with it on the same inputs.
func newModelForwardCmd() *cobra.Command {
	var dir, out string
	cmd := &cobra.Command{
		Use:   "forward --model DIR --out FILE",
		Short: "Write the logits and per-token log-probs of a batch of token rows to a safetensors file",
		Long:  help("model-forward"),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var in struct {
				Tokens        [][]int32 `json:"tokens"`
				AttentionMask [][]int32 `json:"attention_mask"`
			}
			if err := json.NewDecoder(cmd.InOrStdin()).Decode(&in); err != nil {
				return fmt.Errorf("stdin: %w", err)
			}
			m, err := loadModel(cmd, dir)
			if err != nil {
				return err
			}
			logits, logprobs, err := m.Forward(in.Tokens, in.AttentionMask)
			if err != nil {
				return fmt.Errorf("stdin: %w", err)
			}
			return model.SaveTensors(out, map[string]*tensors.Tensor{"logits": logits, "token_logprobs": logprobs})
		},
	}
	cmd.Flags().StringVar(&dir, "model", "", "Hugging Face Qwen2 model directory")
	cmd.Flags().StringVar(&out, "out", "", "safetensors file to write")
	_ = cmd.MarkFlagRequired("model")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

// newModelGenerateCmd exposes batched KV-cache sampling as JSON, with its wall time.
func newModelGenerateCmd() *cobra.Command {
	var dir string
	var repeat int
	cmd := &cobra.Command{
		Use:   "generate --model DIR [--repeat N]",
		Short: "Sample continuations of a batch of token prompts with the KV cache, as JSON (stdin -> stdout; mcprl generate takes text and tasks)",
		Long:  help("model-generate"),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var in struct {
				Prompts      [][]int `json:"prompts"`
				MaxNewTokens int     `json:"max_new_tokens"`
				Temperature  float64 `json:"temperature"`
				TopP         float64 `json:"top_p"`
				TopK         int     `json:"top_k"`
				Stop         []int   `json:"stop"`
				Seed         uint64  `json:"seed"`
			}
			if err := json.NewDecoder(cmd.InOrStdin()).Decode(&in); err != nil {
				return fmt.Errorf("stdin: %w", err)
			}
			if len(in.Prompts) == 0 {
				return fmt.Errorf("stdin: no prompts")
			}
			if repeat < 1 {
				return fmt.Errorf("--repeat %d: want at least 1", repeat)
			}
			m, err := loadModel(cmd, dir)
			if err != nil {
				return err
			}
			comps, seconds, err := m.GenerateTimed(cmd.Context(), in.Prompts, model.SampleOptions{
				Temperature: in.Temperature, TopP: in.TopP, TopK: in.TopK, MaxNewTokens: in.MaxNewTokens, Stop: in.Stop,
			}, in.Seed, repeat)
			if err != nil {
				return err
			}
			out := make([][]int, len(comps))
			for i, c := range comps {
				out[i] = c.Tokens
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"completions": out, "seconds": seconds})
		},
	}
	cmd.Flags().StringVar(&dir, "model", "", "Hugging Face Qwen2 model directory")
	cmd.Flags().IntVar(&repeat, "repeat", 1, "run the whole generation this many times (for timing); the last run's tokens are written")
	_ = cmd.MarkFlagRequired("model")
	return cmd
}

// loadModel loads a model directory on the engine of --engine (auto when not given), writing the engine line to
// the command's stderr.
func loadModel(cmd *cobra.Command, dir string) (*model.Model, error) {
	eng, err := openEngine(cmd, "", cmd.ErrOrStderr())
	if err != nil {
		return nil, err
	}
	return model.Load(eng.Backend, dir)
}
