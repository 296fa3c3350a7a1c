package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/tokenizer"
)

// newModelCmd groups policy-model commands.
func newModelCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "model",
		Short: "Policy model (Qwen2, Llama) commands: create random weights, import or export a GGUF file, inspect a checkpoint",
		Long:  help("model"),
	}
	cmd.AddCommand(newModelInitCmd(), newModelInfoCmd(), newModelImportCmd(), newModelExportCmd(), newModelMergeCmd(), newModelForwardCmd(), newModelGenerateCmd())
	return cmd
}

func newModelInitCmd() *cobra.Command {
	var cfgPath, out, tokDir, dtype string
	var seed uint64
	cmd := &cobra.Command{
		Use:   "init (--config FILE | --tokenizer DIR) --out DIR [--seed S]",
		Short: "Write a Qwen2 model with random weights (Hugging Face initialization) to a directory",
		Long:  help("model-init"),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: Qwen2, %d parameters (hidden %d, %d layers, vocab %d), seed %d\n",
				out, cfg.NumParams(), cfg.HiddenSize, cfg.NumHiddenLayers, cfg.VocabSize, seed)
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "Hugging Face config.json of the model to create (Qwen2)")
	cmd.Flags().StringVar(&out, "out", "", "output directory (created)")
	cmd.Flags().StringVar(&tokDir, "tokenizer", "", "tokenizer directory: copied into the output; sizes the tiny default when --config is not given")
	cmd.Flags().Uint64Var(&seed, "seed", 0, "random seed of the initialization")
	cmd.Flags().StringVar(&dtype, "dtype", "float32", "dtype of the saved weights: float32 or bfloat16")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

func newModelInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "info DIR",
		Short: "Load a Qwen2 or Llama model directory and print its shape and parameter count",
		Long:  help("model-info"),
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The engine line is info's first line, on stdout with the summary.
			eng, err := openEngine(cmd, "", cmd.OutOrStdout())
			if err != nil {
				return err
			}
			m, err := model.Load(eng.Backend, args[0])
			if err != nil {
				return err
			}
			c := &m.Config
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s, %d parameters; hidden %d, intermediate %d, %d layers, %d heads (%d KV), vocab %d, rope_theta %g, tied %v, eos %v\n",
				args[0], c.ArchitectureName(), c.NumParams(), c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers,
				c.NumAttentionHeads, c.NumKeyValueHeads, c.VocabSize, c.RopeTheta, c.TieWordEmbeddings, c.EOSIDs())
			return nil
		},
	}
}
