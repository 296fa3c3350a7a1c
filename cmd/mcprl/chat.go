package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/agent"
	"github.com/mcprl/mcprl/eval"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/policy"
	"github.com/mcprl/mcprl/policy/openai"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/sampling"
	"github.com/mcprl/mcprl/tokenizer"
	"github.com/mcprl/mcprl/toolcall"
)

func newChatCmd() *cobra.Command {
	var (
		served                 openai.Served
		modelDir, fixture, dsn string
		catalog                bool
		sf                     *samplingFlags
	)
	cmd := &cobra.Command{
		Use:   "chat (--model DIR | --policy URL --served-model NAME) --fixture DIR [--dsn DSN]",
		Short: "Talk to a policy as an agent against a live sandbox: see each tool call, its result and the answer",
		Long:  help("chat"),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			stderr, stdout := cmd.ErrOrStderr(), cmd.OutOrStdout()
			if fixture == "" {
				return errors.New("--fixture is required")
			}
			if served.Given() == (modelDir != "") {
				return errors.New("give one policy: --model DIR or --policy URL --served-model NAME")
			}
			if catalog && cmd.Flags().Changed("system-prompt") {
				return errors.New("give --catalog or --system-prompt, not both")
			}
			from, err := sf.resolve(nil, modelDir)
			if err != nil {
				return err
			}
			st := &sf.Settings
			a, err := agent.Open(ctx, fixture, dsn, catalog, st.SystemPrompt)
			if err != nil {
				return err
			}
			defer a.Close()
			promptFrom := ""
			if !catalog && a.SystemPrompt != "" && from != "" && !cmd.Flags().Changed("system-prompt") {
				promptFrom = " (as trained)"
			}
			ecfg := eval.ConfigOf(st, sf.seed)
			ecfg.Samples = 1
			tokDir := served.TokenizerDir
			if !served.Given() {
				tokDir = modelDir
			}
			tok, tpl, err := tokenizer.LoadWithTemplate(tokDir)
			if err != nil {
				return err
			}
			var pol policy.Policy
			if served.Given() {
				pol, err = served.Open(ctx, tok, toolcall.FunctionSchemas(a.Sandbox.Tools()), ecfg.Sample, stderr)
			} else {
				var m *model.Model
				if m, err = loadModel(cmd, modelDir); err == nil {
					pol, err = eval.Sampled(m, ecfg)(nil, 1)
				}
			}
			if err != nil {
				return err
			}
			a.Runner = &rollout.Runner{Policy: pol, Tokenizer: tok, Template: tpl, Config: ecfg.Rollout()}
			a.Intro(stderr, "chat")
			sf.print(stderr, "chat", from)
			if a.SystemPrompt != "" {
				fmt.Fprintf(stderr, "chat: system prompt%s:\n%s\n", promptFrom, a.SystemPrompt)
			}
			return a.Converse(ctx, cmd.InOrStdin(), stdout, stderr)
		},
	}
	fl := cmd.Flags()
	registerServed(fl, &served)
	fl.StringVar(&modelDir, "model", "", "HF-format model directory (an in-process policy)")
	fl.StringVar(&fixture, "fixture", "", "fixture directory (schema.sql, data.sql, workspace/, sandbox.yaml)")
	fl.StringVar(&dsn, "dsn", "", "PostgreSQL DSN for the sandbox's database (default: embedded SQLite)")
	fl.BoolVar(&catalog, "catalog", false, "system prompt: the tool catalog in the user's task format (as examples/customers was trained with)")
	sf = registerSampling(fl, sampling.Settings{TopP: 1, MaxCompletionLength: 1024}, 42, true)
	sf.registerSystemPrompt("system prompt (default: the one the model was trained with, else none: the chat template's tool section shows the tools)")
	return cmd
}
