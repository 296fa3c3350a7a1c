package main

import (
	"bytes"
	"errors"

	"github.com/spf13/cobra"

	"github.com/mcprl/mcprl/eval"
	"github.com/mcprl/mcprl/grpo"
	"github.com/mcprl/mcprl/policy/openai"
	"github.com/mcprl/mcprl/sampling"
	"github.com/mcprl/mcprl/train"
)

// evalFlags are eval's own knobs beyond the shared runFlags.
type evalFlags struct {
	k, samples, batch int
	json, golden      bool
	sf                *samplingFlags
}

func newEvalCmd() *cobra.Command {
	var (
		flags  runFlags
		ef     evalFlags
		served openai.Served
	)
	cmd := &cobra.Command{
		Use:   "eval (--model DIR | --policy URL --served-model NAME | --golden) --tasks FILE [--fixtures DIR] [--k K] [--json] [--seed S] [--temperature T] [--dsn DSN] [--output-dir DIR]",
		Short: "Evaluate a policy on tasks in live sandboxes: success rate, pass@k, tool use, self-correction",
		Long: `eval runs every task K times (--samples N times, N >= K, for a sharper pass@k) through the same
rollout loop as train, each trajectory in its own sandbox fork with its tool calls executed over MCP, and
scores each by its task's ground_truth_assertions while its sandbox is still open. It reports, overall and
per task category:

  success_rate          share of trajectories in which every assertion holds
  pass_at_k             mean over tasks of the unbiased pass@k estimator 1 - C(n-c,k)/C(n,k)
  tool_accuracy         share of tool calls that are well-formed, name a catalog tool and did not error
  hallucination_rate    share of tool calls naming a tool outside the catalog
  format_error_rate     share of tool calls that could not be parsed
  mean_turns            assistant turns per trajectory
  self_correction_rate  among trajectories with a failed or empty tool call, the share that succeeded

as a table, or with --json as one JSON object. With --output-dir it saves every trajectory (turns, calls,
results, reward breakdown) to DIR/trajectories.jsonl, the summary to DIR/report.json, and a page to look at
(tables and a trajectory browser, see mcprl report) to DIR/report.html.

--golden replays each task's golden trajectory instead of sampling a model: the upper bound a careful agent
reaches, and a check that a task set's assertions hold (without --model it uses the embedded small tokenizer).
A model folder written by mcprl train (checkpoint-STEP/ or final/) carries the generation settings it was
trained with (trainer_state.json's "generation"); eval samples with them unless flags or --config say otherwise.
--policy URL --served-model NAME samples from a model served behind an OpenAI-compatible chat-completions
API instead (vLLM, SGLang, Ollama, llama.cpp's server, transformers serve, a hosted endpoint): every request
sends the conversation and the sandbox's tools, native tool calls come back as <tool_call> blocks, and
temperature, top_p, top_k, --samples (as n) and the token budget (as max_tokens) are passed through. The
server is probed before any work starts; a request that still fails after its retries ends its trajectory
with the reason (unscored, counted in n_errors). --tokenizer gives the served model's tokenizer, for exact
token budgets.
A trajectory ended by a failure (a policy server's, a sandbox's, an oracle's) says nothing about the policy:
it is counted in n_errors (the table's errors column; stderr names the first) and left out of every rate,
and pass@k averages over the tasks with at least k scored trajectories. When every trajectory failed, eval
prints the report and exits non-zero.
--config reads model, tasks, fixtures, dsn and the generation settings (max_prompt_length,
max_completion_length, max_tool_calling_iterations, temperature, top_p, top_k, seed) from a train config;
flags override it. Results are deterministic for a given seed and batch size.

Examples:
  mcprl eval --golden --tasks examples/experiment/heldout_tasks.jsonl --fixtures examples/fixtures
  mcprl eval --model runs/grpo/final --tasks examples/experiment/heldout_tasks.jsonl --fixtures examples/fixtures --k 4 --json
  mcprl eval --policy http://localhost:8000/v1 --served-model Qwen/Qwen2.5-7B-Instruct --tasks examples/customers/quick_tasks.jsonl --temperature 0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEval(cmd, &flags, &ef, &served)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&flags.config, "config", "", "train config (YAML) to read model, tasks, fixtures, dsn and generation settings from (optional)")
	fl.StringVar(&flags.over.Model, "model", "", "HF-format model directory with tokenizer files (the policy to evaluate)")
	fl.StringVar(&flags.over.Tasks, "tasks", "", "tasks JSONL file to evaluate on")
	fl.StringVar(&flags.over.Fixtures, "fixtures", "", "directory of fixtures, each named by a task's \"fixture\" (default: the config's, else examples/fixtures)")
	fl.StringVar(&flags.over.OutputDir, "output-dir", "", "save trajectories.jsonl, report.json and report.html here")
	fl.StringVar(&flags.over.DSN, "dsn", "", "PostgreSQL DSN for the sandboxes' databases (default: embedded SQLite)")
	fl.IntVar(&ef.k, "k", 1, "pass@k's k; also the samples per task unless --samples is given")
	fl.IntVar(&ef.samples, "samples", 0, "trajectories per task, n >= k (default: k)")
	fl.BoolVar(&ef.json, "json", false, "print one JSON object instead of the table")
	ef.sf = registerSampling(fl, sampling.Settings{Temperature: 1, TopP: 1, MaxCompletionLength: 512}, 42, true)
	fl.IntVar(&ef.batch, "batch-size", 32, "trajectories sampled together (whole tasks); results depend on it")
	fl.BoolVar(&ef.golden, "golden", false, "replay each task's golden trajectory instead of sampling the model")
	fl.BoolVar(&flags.skipBadTasks, "skip-bad-tasks", false, "skip bad lines of the tasks file (listed and counted) instead of failing")
	registerServed(fl, &served)
	return cmd
}

func runEval(cmd *cobra.Command, flags *runFlags, ef *evalFlags, served *openai.Served) error {
	ctx, stderr, fl := cmd.Context(), cmd.ErrOrStderr(), cmd.Flags()
	cfg := grpo.Default()
	// The settings: a config's, else those a model was trained with (a
	// model GRPO trained samples as it was trained); flags win over both.
	var base *sampling.Settings
	trainedDir, seed := "", ef.sf.seed
	if flags.config != "" {
		c, err := train.LoadConfig(flags.config, grpo.Load, flags.over, stderr)
		if err != nil {
			return err
		}
		cfg = *c
		base = cfg.Sampling()
		if !fl.Changed("seed") {
			seed = cfg.Seed
		}
		if !fl.Changed("output-dir") {
			cfg.OutputDir = "" // a train config's output_dir is where training writes, not eval
		}
	} else {
		cfg.Inputs, cfg.OutputDir = flags.over.Inputs, flags.over.OutputDir
		if flags.over.Model != "" && !ef.golden && !served.Given() {
			trainedDir = flags.over.Model
		}
	}
	from, err := ef.sf.resolve(base, trainedDir)
	if err != nil {
		return err
	}
	var notes bytes.Buffer // printed after the engine line, which loading the model prints first
	if !ef.golden {
		ef.sf.print(&notes, "eval", from)
	}
	ecfg := eval.ConfigOf(&ef.sf.Settings, seed)
	ecfg.BatchSize = ef.batch
	if err := ecfg.Count(ef.k, ef.samples); err != nil {
		return err
	}
	if cfg.Fixtures == "" {
		cfg.Fixtures = "examples/fixtures"
	}
	if cfg.Tasks == "" {
		return errors.New("--tasks is required")
	}
	if served.Given() && (ef.golden || flags.over.Model != "") {
		return errors.New("give one policy: --policy (a served model), --model or --golden")
	}
	in := cfg.Inputs.OnePhase()
	if in.Engine, err = engineOf(cmd, cfg.Engine); err != nil {
		return err
	}
	ws, err := loadFor(cmd, served, in, ef.golden && flags.over.Model == "", flags.skipBadTasks)
	if err != nil {
		return err
	}
	defer ws.Close()
	if _, err := notes.WriteTo(stderr); err != nil {
		return err
	}
	var pol eval.PolicyFor
	if ef.golden {
		pol, err = eval.Golden(ws.Tokenizer), ecfg.ForGolden(ws.Tasks, fl.Changed("max-completion-length"))
	} else {
		pol, err = eval.PolicyOf(ctx, served, ws, ecfg, stderr)
	}
	if err != nil {
		return err
	}
	ev := &eval.Evaluator{Policy: pol, Tokenizer: ws.Tokenizer, Template: ws.Template, Sandboxes: ws.Sandboxes, Config: ecfg, Progress: stderr}
	res, rep, err := ev.Evaluate(ctx, ws.Tasks)
	if err != nil {
		return err
	}
	if cfg.OutputDir != "" {
		if err := eval.SaveWithPage(cfg.OutputDir, res, rep, stderr); err != nil {
			return err
		}
	}
	return errors.Join(rep.Write(cmd.OutOrStdout(), ef.json), eval.AllFailed(res, rep))
}
