package eval

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/policy"
	"github.com/mcprl/mcprl/progress"
	"github.com/mcprl/mcprl/report"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/sampling"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/tokenizer"
	"github.com/mcprl/mcprl/toolcall"
)

// Config sizes an evaluation.
type Config struct {
	// Samples is n, the trajectories run per task (default 1).
	Samples int
	// K is pass@k's k (default Samples); 1 <= K <= Samples.
	K int
	// Rollout limits, with TRL's names and meaning (see rollout.Config).
	MaxPromptLength          int
	MaxCompletionLength      int
	MaxToolCallingIterations int
	// Sample holds temperature, top_p, top_k and the seed. Batch b of a run
	// samples with seed Sample.Seed*1_000_003 + b.
	Sample policy.SampleOptions
	// BatchSize bounds the trajectories sampled together (whole tasks: a
	// batch holds at least one task's n trajectories); 0 runs all at once.
	// Results depend on it (it decides the sampling seeds), so keep it fixed
	// when comparing runs.
	BatchSize int
}

// ConfigOf returns the Config that samples with s, seeded by seed: its
// token budgets, its tool rounds (4 where s sets no limit) and its sampling
// knobs. Samples, K and BatchSize are left to the caller.
func ConfigOf(s *sampling.Settings, seed int64) Config {
	return Config{MaxPromptLength: s.MaxPromptLength, MaxCompletionLength: s.MaxCompletionLength,
		MaxToolCallingIterations: s.Iterations(4), Sample: s.SampleOptions(seed)}
}

// Rollout returns the rollout settings of c: one trajectory per task, its
// limits, and its sampling knobs as they are (Run seeds each batch apart).
func (c Config) Rollout() rollout.Config {
	return rollout.Config{NumGenerations: 1, MaxPromptLength: c.MaxPromptLength, MaxCompletionLength: c.MaxCompletionLength,
		MaxToolCallingIterations: c.MaxToolCallingIterations, Sample: c.Sample}
}

// Count sets pass@k's k and the trajectories per task (samples; <= 0: k),
// which must hold 1 <= k <= samples.
func (c *Config) Count(k, samples int) error {
	if samples <= 0 {
		samples = k
	}
	if k < 1 || samples < k {
		return fmt.Errorf("--k %d and --samples %d: need 1 <= k <= samples", k, samples)
	}
	c.K, c.Samples = k, samples
	return nil
}

func (c Config) samples() int { return max(c.Samples, 1) }

func (c Config) k() int {
	if c.K <= 0 {
		return c.samples()
	}
	return c.K
}

// Sampled samples every batch from m, with a KV cache sized to the batch's
// prompts and cfg's limits as the GRPO trainer sizes it (a cache much
// larger than needed costs time on every decoding step).
func Sampled(m *model.Model, cfg Config) PolicyFor {
	return Fixed(&model.Policy{M: m, CompletionSlots: model.CompletionSlots(cfg.MaxCompletionLength, cfg.MaxToolCallingIterations)})
}

// PolicyFor returns the policy that samples one batch, in which tasks[j]
// is run n times as sequences j*n .. j*n+n-1.
type PolicyFor func(tasks []*task.Task, n int) (policy.Policy, error)

// Fixed samples every batch from p (a model).
func Fixed(p policy.Policy) PolicyFor {
	return func([]*task.Task, int) (policy.Policy, error) { return p, nil }
}

// Scripted replays, for every sample of a task, the assistant turns that
// turns gives for it (each turn's text is tokenized with tok; a turn that
// should end the trajectory ends with <|im_end|>). Whatever the tools
// answer, the script goes on: it is an agent that cannot adapt.
func Scripted(tok *tokenizer.Tokenizer, turns func(*task.Task) ([]string, error)) PolicyFor {
	return func(tasks []*task.Task, n int) (policy.Policy, error) {
		scripts := make([][][]int, 0, len(tasks)*n)
		for _, t := range tasks {
			texts, err := turns(t)
			if err != nil {
				return nil, err
			}
			script := make([][]int, len(texts))
			for i, s := range texts {
				script[i] = tok.Encode(s)
			}
			for range n {
				scripts = append(scripts, script)
			}
		}
		return &rollout.Script{Scripts: scripts}, nil
	}
}

// Golden replays each task's golden trajectory (task.GoldenTurns).
func Golden(tok *tokenizer.Tokenizer) PolicyFor { return Scripted(tok, goldenTurns) }

// goldenTurns is task.GoldenTurns with calls in the <tool_call> form.
func goldenTurns(t *task.Task) ([]string, error) { return task.GoldenTurns(t, toolcall.RenderCall) }

// GoldenIterations is the number of tool-calling rounds the longest golden
// trajectory of tasks needs (for Config.MaxToolCallingIterations).
func GoldenIterations(tasks []task.Task) (int, error) {
	iters := 0
	for i := range tasks {
		turns, err := goldenTurns(&tasks[i])
		if err != nil {
			return 0, err
		}
		iters = max(iters, len(turns))
	}
	return iters, nil
}

// Evaluator runs tasks against their fixtures' sandboxes.
type Evaluator struct {
	Policy    PolicyFor
	Tokenizer *tokenizer.Tokenizer
	Template  *tokenizer.Template
	// Sandboxes maps a fixture name to its sandbox factory.
	Sandboxes map[string]*sandbox.Factory
	Config    Config
	// Progress shows how far the evaluation is: a live bar on a terminal, a
	// line per batch elsewhere; nil prints nothing.
	Progress io.Writer
}

// Sample is one scored trajectory.
type Sample struct {
	Task *task.Task
	// Index is the sample's number among its task's n (0-based).
	Index      int
	Trajectory *chat.Trajectory
	// Catalog names the tools the agent was offered.
	Catalog []string
	// Assertions is the task's ground_truth_assertions score (the share that
	// hold live); Verifiable is the training reward "verifiable", for
	// inspection. Both are zero when ScoreError is set.
	Assertions reward.Score
	Verifiable reward.Score
	// ScoreError says why the trajectory could not be scored (its sandbox
	// failed, an oracle failed); empty otherwise.
	ScoreError string
}

// Errored reports whether the trajectory was ended by an infrastructure
// failure (a policy server's, a sandbox's or a tool server's) or could not
// be scored: it says nothing about the policy, and the metrics leave it
// out of their rates (Metrics.NErrors counts it).
func (s *Sample) Errored() bool {
	return s.ScoreError != "" || s.Trajectory == nil || s.Trajectory.Error != ""
}

// ErrorOf returns why the sample errored (Errored), or "".
func (s *Sample) ErrorOf() string {
	switch {
	case s.Trajectory != nil && s.Trajectory.Error != "":
		return s.Trajectory.Error
	case s.ScoreError != "":
		return s.ScoreError
	case s.Trajectory == nil:
		return "no trajectory"
	}
	return ""
}

// Success reports whether every assertion of the task held.
func (s *Sample) Success() bool {
	return s.ScoreError == "" && s.Trajectory != nil && s.Trajectory.Error == "" &&
		len(s.Task.GroundTruthAssertions) > 0 && s.Assertions.Value == 1
}

// Run runs every task Config.Samples times and returns the scored
// trajectories, task by task in the order given, samples in order.
func (e *Evaluator) Run(ctx context.Context, tasks []task.Task) ([]*Sample, error) {
	cfg := e.Config
	n := cfg.samples()
	if k := cfg.k(); k > n {
		return nil, fmt.Errorf("eval: k=%d exceeds the %d samples per task", k, n)
	}
	per := len(tasks)
	if cfg.BatchSize > 0 {
		per = max(cfg.BatchSize/n, 1)
	}
	batches := (len(tasks) + per - 1) / per
	bar := progress.New(e.Progress, "eval", batches, 0)
	bar.SetUnit("batch")
	defer bar.Done()
	out := make([]*Sample, 0, len(tasks)*n)
	succeeded, scored := 0, 0
	for b := 0; b < batches; b++ {
		chunk := tasks[b*per : min((b+1)*per, len(tasks))]
		got, err := e.batch(ctx, chunk, int64(b))
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
		for _, s := range got {
			if !s.Errored() {
				scored++
			}
			if s.Success() {
				succeeded++
			}
		}
		fields := []progress.Field{{Name: "tasks", Value: float64(min((b+1)*per, len(tasks))), Format: "%.0f"}}
		if scored > 0 {
			fields = append(fields, progress.F("success", float64(succeeded)/float64(scored)))
		}
		if errs := len(out) - scored; errs > 0 {
			fields = append(fields, progress.Field{Name: "errors", Value: float64(errs), Format: "%.0f"})
		}
		bar.Log(b+1, fields...)
	}
	return out, nil
}

func (e *Evaluator) batch(ctx context.Context, tasks []task.Task, b int64) ([]*Sample, error) {
	cfg := e.Config
	n := cfg.samples()
	jobs := make([]rollout.Job, len(tasks))
	ptrs := make([]*task.Task, len(tasks))
	for i := range tasks {
		t := &tasks[i]
		f := e.Sandboxes[t.Fixture]
		if f == nil {
			return nil, fmt.Errorf("eval: task %q: no sandbox for fixture %q", t.ID, t.Fixture)
		}
		jobs[i] = rollout.Job{Task: t, Factory: f}
		ptrs[i] = t
	}
	pol, err := e.Policy(ptrs, n)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	rc := cfg.Rollout()
	rc.NumGenerations, rc.Sample.Seed = n, cfg.Sample.Seed*1_000_003+b
	r := &rollout.Runner{
		Policy: pol, Tokenizer: e.Tokenizer, Template: e.Template, Config: rc,
		Rewards: []reward.Func{reward.NewAssertions(), reward.Verifiable()},
	}
	results, err := r.Run(ctx, jobs)
	if err != nil {
		return nil, fmt.Errorf("eval: rollout: %w", err)
	}
	out := make([]*Sample, len(results))
	for i, res := range results {
		t := res.Task
		s := &Sample{Task: t, Index: i % n, Trajectory: res.Trajectory, Catalog: toolNames(e.Sandboxes[t.Fixture])}
		switch {
		case res.Scores == nil || res.Error != "":
			// Ended by a failure (a policy server's, a tool server's): no
			// fair sample of the policy, so it gets no reward.
			s.ScoreError = "not scored: " + res.Error
		case res.Errs[0] != nil:
			s.ScoreError = res.Errs[0].Error()
		case res.Errs[1] != nil:
			s.ScoreError = res.Errs[1].Error()
		default:
			s.Assertions, s.Verifiable = res.Scores[0], res.Scores[1]
		}
		out[i] = s
	}
	return out, nil
}

func toolNames(f *sandbox.Factory) []string {
	var names []string
	for _, t := range f.Tools() {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	return names
}

// Record is a scored trajectory as saved for inspection (one JSON line).
type Record struct {
	TaskID    string            `json:"task_id"`
	Category  string            `json:"category,omitempty"`
	Sample    int               `json:"sample"`
	Success   bool              `json:"success"`
	Turns     []chat.TurnRecord `json:"turns"`
	Answer    string            `json:"answer"`
	Truncated bool              `json:"truncated,omitempty"`
	// Error is what ended the trajectory early or kept it from being scored.
	Error string `json:"error,omitempty"`
	// Reward is the breakdown: {"assertions": score, "verifiable": score},
	// each with its reason, checks and parts.
	Reward map[string]reward.Score `json:"reward"`
}

// Record returns s as saved for inspection.
func (s *Sample) Record() Record {
	r := Record{TaskID: s.Task.ID, Category: s.Task.Category, Sample: s.Index, Success: s.Success(), Turns: []chat.TurnRecord{}}
	if tr := s.Trajectory; tr != nil {
		r.Answer, r.Truncated, r.Error = tr.Answer, tr.Truncated, tr.Error
		r.Turns = tr.Records()
	}
	if s.ScoreError != "" {
		if r.Error == "" {
			r.Error = s.ScoreError
		}
	} else {
		r.Reward = map[string]reward.Score{"assertions": s.Assertions, "verifiable": s.Verifiable}
	}
	return r
}

// WriteJSONL writes one Record per sample to w, in order.
func WriteJSONL(w io.Writer, samples []*Sample) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, s := range samples {
		if err := enc.Encode(s.Record()); err != nil {
			return fmt.Errorf("eval: write trajectory of %q: %w", s.Task.ID, err)
		}
	}
	return nil
}

// FirstError names the first sample a failure ended, as "ID (sample I):
// reason"; "" when none did.
func FirstError(res []*Sample) string {
	for _, s := range res {
		if s.Errored() {
			return fmt.Sprintf("%s (sample %d): %s", s.Task.ID, s.Index, s.ErrorOf())
		}
	}
	return ""
}

// SaveWithPage is Save, then the page to look at, dir/report.html
// (report.Generate over dir). It notes to log the lines the page skipped,
// then where the trajectories and the page are.
func SaveWithPage(dir string, res []*Sample, rep *Report, log io.Writer) error {
	if err := Save(dir, res, rep); err != nil {
		return err
	}
	warnings, err := report.Generate(filepath.Join(dir, "report.html"), dir)
	for _, w := range warnings {
		fmt.Fprintf(log, "eval: report skipped %s\n", w)
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(log, "eval: trajectories in %s\neval: report in %s\n",
		filepath.Join(dir, "trajectories.jsonl"), filepath.Join(dir, "report.html"))
	return err
}

// Save writes the samples to dir/trajectories.jsonl (WriteJSONL) and the
// report to dir/report.json.
func Save(dir string, res []*Sample, rep *Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "trajectories.jsonl"))
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	w := bufio.NewWriter(f)
	if err := WriteJSONL(w, res); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("eval: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), 0o644)
}
