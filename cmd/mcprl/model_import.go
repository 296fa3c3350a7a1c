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
		Long:  help("model-import"),
		Args:  cobra.NoArgs,
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
		Long:  help("model-export"),
		Args:  cobra.ExactArgs(1),
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
		Long:  help("model-merge"),
		Args:  cobra.NoArgs,
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
