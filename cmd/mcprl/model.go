package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/gguf/convert"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/tokenizer"
)

// newModelCmd groups policy-model commands.
func newModelCmd() *cobra.Command {
	return command("model", nil, newModelInitCmd(), newModelInfoCmd(), newModelImportCmd(), newModelExportCmd(), newModelMergeCmd(), newModelForwardCmd(), newModelGenerateCmd())
}

func newModelInitCmd() *cobra.Command {
	var cfgPath, out, tokDir, dtype string
	var seed uint64
	cmd := command("model-init", func(cmd *cobra.Command, _ []string) error {
		var cfg *model.Config
		var err error
		switch {
		case cfgPath != "":
			if cfg, err = model.LoadConfig(cfgPath); err != nil {
				return err
			}
		case tokDir != "":
			tok, err := tokenizer.Load(tokDir)
			if err != nil {
				return err
			}
			cfg = model.TinyConfigFor(tok)
		default:
			return fmt.Errorf("give --config FILE or --tokenizer DIR (for the tiny default sized to it)")
		}
		eng, err := openEngine(cmd, "", cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		m, err := model.New(eng.Backend, cfg, seed)
		if err != nil {
			return err
		}
		if err := m.Save(out, model.SaveOptions{DType: dtype, TokenizerDir: tokDir}); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s, seed %d\n", out, cfg.Summary(), seed)
		return nil
	})
	cmd.Flags().StringVar(&cfgPath, "config", "", "Hugging Face config.json of the model to create (Qwen2)")
	cmd.Flags().StringVar(&out, "out", "", "output directory (created)")
	cmd.Flags().StringVar(&tokDir, "tokenizer", "", "tokenizer directory: copied into the output; sizes the tiny default when --config is not given")
	cmd.Flags().Uint64Var(&seed, "seed", 0, "random seed of the initialization")
	cmd.Flags().StringVar(&dtype, "dtype", "float32", "dtype of the saved weights: float32 or bfloat16")
	required(cmd, "out")
	return cmd
}

func newModelInfoCmd() *cobra.Command {
	cmd := command("model-info", func(cmd *cobra.Command, args []string) error {
		// The engine line is info's first line, on stdout with the summary.
		eng, err := openEngine(cmd, "", cmd.OutOrStdout())
		if err != nil {
			return err
		}
		m, err := model.Load(eng.Backend, args[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", args[0], m.Config.Summary())
		return nil
	})
	cmd.Args = cobra.ExactArgs(1)
	return cmd
}

func newModelImportCmd() *cobra.Command {
	var from, out, template string
	var addTokens []string
	cmd := command("model-import", func(cmd *cobra.Command, _ []string) error {
		opts := convert.ImportOptions{AddTokens: addTokens}
		if template != "" {
			data, err := os.ReadFile(template)
			if err != nil {
				return fmt.Errorf("--chat-template: %w", err)
			}
			opts.ChatTemplate = string(data)
		}
		cfg, err := convert.ImportGGUF(from, out, opts)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s\n", out, cfg.Summary())
		return nil
	})
	cmd.Flags().StringVar(&from, "from", "", "GGUF file to import")
	cmd.Flags().StringVar(&out, "out", "", "output directory (created)")
	cmd.Flags().StringVar(&template, "chat-template", "", "Jinja chat template file that replaces the GGUF's (e.g. one that renders tools)")
	cmd.Flags().StringSliceVar(&addTokens, "add-tokens", nil, "tokens to add to the vocabulary (comma-separated), e.g. '<tool_call>,</tool_call>': their embedding rows start as the mean row")
	required(cmd, "from", "out")
	return cmd
}

func newModelExportCmd() *cobra.Command {
	var format, out, dtype, name string
	cmd := command("model-export", func(cmd *cobra.Command, args []string) error {
		if format != "gguf" {
			return fmt.Errorf("--format %q: only gguf is supported", format)
		}
		counts, err := convert.ExportGGUF(args[0], out, convert.ExportOptions{DType: dtype, Name: name})
		if err != nil {
			return err
		}
		st, err := os.Stat(out)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d bytes, tensors %v\n", out, st.Size(), counts)
		return nil
	})
	cmd.Args = cobra.ExactArgs(1)
	cmd.Flags().StringVar(&format, "format", "gguf", "output format (gguf)")
	cmd.Flags().StringVar(&out, "out", "", "file to write")
	cmd.Flags().StringVar(&dtype, "dtype", "f32", "type of the weight matrices: f32, f16 or q8_0")
	cmd.Flags().StringVar(&name, "name", "", "general.name of the file (default: the directory's name)")
	required(cmd, "out")
	return cmd
}

func newModelMergeCmd() *cobra.Command {
	var modelDir, adapter, out, dtype string
	cmd := command("model-merge", func(cmd *cobra.Command, _ []string) error {
		m, err := loadModel(cmd, modelDir)
		if err != nil {
			return err
		}
		lc, err := m.MergeAdapter(adapter)
		if err != nil {
			return fmt.Errorf("%s: %w", modelDir, err)
		}
		if err := m.Save(out, model.SaveOptions{DType: dtype, TokenizerDir: modelDir}); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s with the adapter (%s) merged\n", out, modelDir, lc)
		return nil
	})
	cmd.Flags().StringVar(&modelDir, "model", "", "model directory (with an adapter/ subdirectory, or give --adapter)")
	cmd.Flags().StringVar(&adapter, "adapter", "", "peft LoRA adapter directory to merge")
	cmd.Flags().StringVar(&out, "out", "", "output directory (created)")
	cmd.Flags().StringVar(&dtype, "dtype", "float32", "dtype of the saved weights: float32 or bfloat16")
	required(cmd, "model", "out")
	return cmd
}

// newModelForwardCmd exposes the forward pass, so that other implementations (transformers, in python/tests)
// can be compared with it on the same inputs.
func newModelForwardCmd() *cobra.Command {
	var dir, out string
	cmd := command("model-forward", func(cmd *cobra.Command, _ []string) error {
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
	})
	cmd.Flags().StringVar(&dir, "model", "", "Hugging Face Qwen2 model directory")
	cmd.Flags().StringVar(&out, "out", "", "safetensors file to write")
	required(cmd, "model", "out")
	return cmd
}

// newModelGenerateCmd exposes batched KV-cache sampling as JSON, with its wall time.
func newModelGenerateCmd() *cobra.Command {
	var dir string
	var repeat int
	var bf16 bool
	cmd := command("model-generate", func(cmd *cobra.Command, _ []string) error {
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
		m, err := loadModel(cmd, dir)
		if err != nil {
			return err
		}
		if bf16 {
			if err := m.FreezeBF16(); err != nil {
				return fmt.Errorf("--bf16: %w", err)
			}
		}
		comps, seconds, err := m.GenerateTimed(cmd.Context(), in.Prompts, model.SampleOptions{
			Temperature: in.Temperature, TopP: in.TopP, TopK: in.TopK, MaxNewTokens: in.MaxNewTokens, Stop: in.Stop,
		}, in.Seed, repeat)
		if err != nil {
			return fmt.Errorf("stdin: %w", err)
		}
		out := make([][]int, len(comps))
		for i, c := range comps {
			out[i] = c.Tokens
		}
		return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"completions": out, "seconds": seconds})
	})
	cmd.Flags().StringVar(&dir, "model", "", "Hugging Face Qwen2 model directory")
	cmd.Flags().IntVar(&repeat, "repeat", 1, "run the whole generation this many times (for timing); the last run's tokens are written")
	cmd.Flags().BoolVar(&bf16, "bf16", false, "sample in bfloat16: every weight stored in bfloat16, the linear layers' matmuls on bfloat16 inputs (engine xla)")
	required(cmd, "model")
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
