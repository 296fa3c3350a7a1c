package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/inputs"
	"github.com/mcprl/mcprl/model"
)

// engineFlag is --engine: what runs the model (model.Engine). It is registered once, by addEngineFlag, as a
// persistent flag of the commands that run a model; it overrides a config's `engine`.
const engineFlag = "engine"

// addEngineFlag registers --engine on each command that runs a model, for it and its subcommands.
func addEngineFlag(cmds ...*cobra.Command) {
	for _, c := range cmds {
		c.PersistentFlags().String(engineFlag, "", "what runs the model: "+model.Engines+
			" (default: the config's engine, else auto: XLA where its plugin is installed (scripts/install-xla.sh), else simplego)")
	}
}

// engineOf is the engine a command runs on: --engine when given, else the config's setting (configured; ""
// is auto).
func engineOf(cmd *cobra.Command, configured model.Engine) (model.Engine, error) {
	s := string(configured)
	if f := cmd.Flag(engineFlag); f != nil && f.Changed {
		s = f.Value.String()
	}
	e, err := model.ParseEngine(s)
	if err != nil {
		return "", fmt.Errorf("--%s: %w", engineFlag, err)
	}
	return e, nil
}

// openEngine opens the engine of --engine (else configured) and writes its engine line to w.
func openEngine(cmd *cobra.Command, configured model.Engine, w io.Writer) (*model.EngineBackend, error) {
	e, err := engineOf(cmd, configured)
	if err != nil {
		return nil, err
	}
	return inputs.OpenEngine(e, w)
}
