package grpo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"time"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:staticcheck // GoMLX graph code reads best with the dot import.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/policy"
	"github.com/mcprl/mcprl/progress"
	"github.com/mcprl/mcprl/report"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/sandbox"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/tokenizer"
	"github.com/mcprl/mcprl/train"
)

// Trainer runs GRPO: for each generation batch it rolls out num_generations
// trajectories per prompt against live sandboxes, scores them, computes group
// advantages and takes optimizer steps on the policy's sampled tokens.
type Trainer struct {
	Config    *Config
	Model     *model.Model
	Ref       *model.Model // frozen reference model; required when beta > 0
	Tokenizer *tokenizer.Tokenizer
	Template  *tokenizer.Template
	// TokenizerDir is copied into every checkpoint ("" copies nothing).
	TokenizerDir string
	Tasks        []task.Task
	// Sandboxes maps a fixture name to its sandbox factory.
	Sandboxes map[string]*sandbox.Factory
	// Rewards are scored per trajectory and summed with Weights (TRL's
	// reward_funcs and reward_weights).
	Rewards []reward.Func
	Weights []float64
	// Progress receives one status line per step; nil prints nothing.
	Progress io.Writer
	// OnGeneration, when set, sees every generation batch with its rewards
	// (for inspection and tests).
	OnGeneration func(step int, trajs []*chat.Trajectory, rewards []float64)

	accumulate, apply, logProbs, refLogProbs *mlctx.Exec
	vars                                     []*mlctx.Variable
	lossStarts                               map[[2]int]bool // (length, start column > 0) pairs compiled (lossColumns)
}

// Train runs the whole schedule, or what is left of it when resume finds a
// checkpoint in output_dir. Every steps_per_generation x num_iterations /
// gradient_accumulation_steps optimizer steps it draws a new generation
// batch (rollouts, rewards, advantages); each step then trains on its share
// of the batch's micro-batches. It writes metrics.jsonl, checkpoint-STEP/
// every save_steps (at the end of a generation batch) and final/, and ends
// with a summary line.
func (t *Trainer) Train(ctx context.Context, resume bool) error {
	cfg := t.Config
	if cfg.Beta > 0 && t.Ref == nil {
		return fmt.Errorf("grpo: beta %g needs a reference model", cfg.Beta)
	}
	total, perEpoch, cycleSteps, err := t.schedule()
	if err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	st := &train.State{}
	if resume {
		if st, err = train.Restore(cfg.OutputDir, t.Model); err != nil {
			return fmt.Errorf("grpo: %w", err)
		}
	}
	// The saved model folders carry the generation settings.
	if err := t.recordGeneration(st); err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	if err := t.compile(); err != nil {
		return err
	}
	loop := &train.Loop{
		Args: &cfg.Arguments, Model: t.Model, TokenizerDir: t.TokenizerDir,
		TotalSteps: total, StepsPerEpoch: perEpoch,
		CanSave: func(step int) bool { return step%cycleSteps == 0 },
		Label:   "train", Show: []string{"reward"}, Progress: t.Progress,
	}
	var gen *generation
	step := func(ctx context.Context, st *train.State, lr float64, w *train.LogWindow) (train.StepResult, error) {
		offset := st.GlobalStep % cycleSteps
		if gen == nil || offset == 0 {
			var err error
			if gen, err = t.generate(ctx, st); err != nil {
				return train.StepResult{}, err
			}
			w.AddAll(gen.metrics)
		}
		loss, gradNorm, stepMetrics, err := t.optimizerStep(gen, offset, lr)
		if err != nil {
			return train.StepResult{}, err
		}
		for _, m := range stepMetrics {
			w.AddAll(m)
		}
		return train.StepResult{
			Loss: loss, GradNorm: gradNorm, Show: []progress.Field{progress.F("reward", gen.metrics["reward"])},
			Samples: gen.samplesAt(st.GlobalStep + 1),
		}, nil
	}
	start, firstStep := time.Now(), st.GlobalStep
	if err := loop.Run(ctx, st, step); err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	if t.Progress != nil {
		fmt.Fprintln(t.Progress, summary(st, firstStep, time.Since(start), filepath.Join(cfg.OutputDir, "final")))
	}
	return nil
}

// schedule returns the run's length in optimizer steps, the steps of one
// epoch, and the steps of one generation batch's cycle (steps_per_generation
// x num_iterations / gradient_accumulation_steps).
func (t *Trainer) schedule() (total, perEpoch, cycleSteps int, err error) {
	cfg := t.Config
	if total, err = cfg.TotalSteps(len(t.Tasks)); err != nil {
		return 0, 0, 0, err
	}
	if perEpoch, err = cfg.StepsPerEpoch(len(t.Tasks)); err != nil {
		return 0, 0, 0, err
	}
	_, spg, err := cfg.Generation()
	if err != nil {
		return 0, 0, 0, err
	}
	if (spg*cfg.NumIterations)%cfg.GradientAccumulationSteps != 0 {
		return 0, 0, 0, fmt.Errorf("steps_per_generation (%d) x num_iterations (%d) must be a multiple of gradient_accumulation_steps (%d)",
			spg, cfg.NumIterations, cfg.GradientAccumulationSteps)
	}
	return total, perEpoch, spg * cfg.NumIterations / cfg.GradientAccumulationSteps, nil
}

// recordGeneration puts the generation settings into the state (saved in
// trainer_state.json) and the model's generation_config.json.
func (t *Trainer) recordGeneration(st *train.State) error {
	g := t.Config.Sampling()
	raw, err := json.Marshal(g)
	if err != nil {
		return err
	}
	st.Generation = raw
	t.Model.GenerationConfig, err = g.hfGenerationConfig(t.Model.GenerationConfig)
	return err
}

// isInGraph reports whether the training graph computes the importance-sampling correction from its own
// forward pass: the policy has not moved since it sampled (Config.NeedsOldLogProbs false) and that forward pass
// is the one the old log-probs would come from (no LoRA dropout in it).
func (t *Trainer) isInGraph() bool {
	cfg := t.Config
	dropout := t.Model.LoRA() != nil && t.Model.LoRA().Dropout > 0 && !cfg.DisableDropout
	return cfg.VLLMImportanceSamplingCorrection && !cfg.NeedsOldLogProbs() && !dropout
}

// needsOldLogProbs reports whether a forward pass computes each generation batch's old log-probs before its
// optimizer steps: the policy moves in between, or the importance-sampling correction needs them and the
// training graph cannot take them from its own forward pass.
func (t *Trainer) needsOldLogProbs() bool {
	return t.Config.NeedsOldLogProbs() || (t.Config.VLLMImportanceSamplingCorrection && !t.isInGraph())
}

// compile builds the training and log-prob graphs (compiled per shape on
// first use, then reused).
func (t *Trainer) compile() error {
	cfg := t.Config
	t.vars = train.TrainableVariables(t.Model)
	if len(t.vars) == 0 {
		return fmt.Errorf("grpo: the model has no trainable variables")
	}
	opt := cfg.Optimizer()
	lossCfg := cfg.LossConfig()
	build := func(last bool) func(ctx *mlctx.Context, ins []*Node) []*Node {
		return func(ctx *mlctx.Context, ins []*Node) []*Node {
			in := lossInputs{tokens: ins[0], attn: ins[1], mask: ins[2], adv: ins[3], numItems: ins[4]}
			i := 5
			if t.needsOldLogProbs() {
				in.old = ins[i]
				i++
			}
			if cfg.Beta > 0 {
				in.ref = ins[i]
				i++
			}
			if cfg.VLLMImportanceSamplingCorrection {
				in.isRatio = ins[i] // the ratio, or the sampler's log-probs when the graph computes it
				i++
			}
			if last {
				in.lr = ins[i]
			}
			// The mask holds the columns from the first one the loss covers (lossColumns): the log-probs of the
			// earlier positions are not computed (TRL's logits_to_keep).
			from := in.tokens.Shape().Dim(1) - in.mask.Shape().Dim(1)
			if from > 0 {
				in.mask = Concatenate([]*Node{Zeros(in.mask.Graph(), shapes.Make(in.mask.DType(), in.mask.Shape().Dim(0), from)), in.mask}, 1)
			}
			// The loss's forward is a training one (a LoRA adapter's dropout acts) unless disable_dropout.
			ctx.SetTraining(in.tokens.Graph(), !cfg.DisableDropout)
			logp := t.Model.TokenLogProbsFrom(ctx, in.tokens, in.attn, cfg.Temperature, from)
			var isSums []*Node
			if t.isInGraph() {
				// The policy has not moved since it sampled: the old log-probs are this forward pass's own,
				// so the correction is computed here rather than after a separate forward pass.
				in.isRatio, isSums = cfg.importanceSamplingGraph(StopGradient(logp), in.isRatio, in.mask)
			}
			out, err := Loss(lossCfg, LossInputs{
				LogP: logp, OldLogP: in.old, RefLogP: in.ref, Mask: in.mask,
				Advantages: in.adv, NumItemsInBatch: in.numItems, ImportanceSamplingRatio: in.isRatio,
			})
			if err != nil {
				panic(err)
			}
			g := logp.Graph()
			nodes := make([]*Node, len(t.vars))
			for j, v := range t.vars {
				nodes[j] = v.ValueGraph(g)
			}
			grads := Gradient(out.Loss, nodes...)
			results := []*Node{out.Loss, out.ClipRatioLowMean, out.ClipRatioHighMean, out.ClipRatioRegionMean}
			if cfg.Beta > 0 {
				results = append(results, out.KL)
			}
			results = append(results, isSums...)
			if !last {
				if err := opt.AccumulateGraph(ctx, t.vars, grads); err != nil {
					panic(err)
				}
				return results
			}
			norm, err := opt.ApplyGraph(ctx, t.vars, grads, in.lr)
			if err != nil {
				panic(err)
			}
			return append(results, ConvertDType(norm, logp.DType()))
		}
	}
	var err error
	if t.accumulate, err = mlctx.NewExecAny(t.Model.Backend, t.Model.Ctx, build(false)); err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	if t.apply, err = mlctx.NewExecAny(t.Model.Backend, t.Model.Ctx, build(true)); err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	// Room for the length buckets GoMLX's default allowed, and the start columns lossColumns adds.
	t.accumulate.SetMaxCache(DefaultExecMaxCacheSize + maxLossStarts)
	t.apply.SetMaxCache(DefaultExecMaxCacheSize + maxLossStarts)
	logProbs := func(m *model.Model) func(ctx *mlctx.Context, tokens, attn *Node) *Node {
		return func(ctx *mlctx.Context, tokens, attn *Node) *Node {
			return StopGradient(m.TokenLogProbsAt(ctx, tokens, attn, cfg.Temperature))
		}
	}
	if t.logProbs, err = mlctx.NewExec(t.Model.Backend, t.Model.Ctx, logProbs(t.Model)); err != nil {
		return fmt.Errorf("grpo: %w", err)
	}
	if t.Ref != nil {
		if t.refLogProbs, err = mlctx.NewExec(t.Ref.Backend, t.Ref.Ctx, logProbs(t.Ref)); err != nil {
			return fmt.Errorf("grpo: %w", err)
		}
	}
	return nil
}

// lossInputs is the order of a training graph's inputs.
type lossInputs struct{ tokens, attn, mask, adv, numItems, old, ref, isRatio, lr *Node }

// scored is one trajectory with its score from each reward function.
type scored struct {
	traj   *chat.Trajectory
	task   *task.Task
	scores []float64
	res    *rollout.Result // the rollout's result (its Setback, where recovery branching is on)
}

// generation is one generation batch, ready for its optimizer steps.
type generation struct {
	trajs      []*chat.Trajectory
	advantages []float64
	length     int       // padded sequence length (a shape bucket)
	numItems   float32   // policy-sampled tokens in the whole batch (dapo's normaliser)
	old, ref   []float32 // per-token log-probs [len(trajs) * length] when needed
	// isRatio is the importance-sampling correction [len(trajs) * length], nil when off; when the training
	// graph computes it (the policy has not moved since sampling), the sampler's log-probs instead.
	isRatio []float32
	metrics map[string]float64
	// samples are the batch's trajectories as saved to completions.jsonl (their step set when logged).
	samples []report.Completion
	// baseMicroBatches are the root groups' micro-batches; recovery
	// branches follow them (optimizerStep spreads those over the cycle).
	baseMicroBatches int
}

// generate draws the next prompts, rolls out num_generations trajectories
// of each against live sandboxes, scores them and computes advantages. With
// dynamic_sampling, groups whose rewards all agree are dropped and more
// prompts are drawn to refill the batch.
func (t *Trainer) generate(ctx context.Context, st *train.State) (*generation, error) {
	cfg := t.Config
	n := cfg.NumGenerations
	want, err := cfg.PromptsPerGeneration()
	if err != nil {
		return nil, err
	}
	batch := NewDynamicBatch[scored](want, n)
	// Every group sampled this step, kept or dropped: the logged reward and
	// trajectory metrics describe what the policy sampled, as TRL's do. With
	// dynamic_sampling the trained-on batch leaves out the groups whose
	// rewards all agree, the all-correct ones among them, so its mean
	// understates the policy more the better it gets.
	var sampled []scored
	var sampledRewards []float64
	// Every setback snapshot is released when the step's rollouts are done
	// with, branched or not.
	defer func() {
		for _, it := range sampled {
			it.res.Setback.Close()
		}
	}()
	for round := 0; !batch.Full(); round++ {
		if round > 0 && (!cfg.DynamicSampling || cfg.DynamicSamplingMaxRounds > 0 && round >= cfg.DynamicSamplingMaxRounds) {
			break
		}
		jobs, err := t.nextJobs(st, want)
		if err != nil {
			return nil, err
		}
		got, err := t.rollout(ctx, jobs, int64(st.Rounds))
		st.Rounds++
		if err != nil {
			return nil, err
		}
		for i, it := range got {
			if it.traj.Error != "" && t.Progress != nil {
				fmt.Fprintf(t.Progress, "\nstep %d: a trajectory of task %q is left out of training: %s\n", st.GlobalStep+1, jobs[i/n].Task.ID, it.traj.Error)
			}
		}
		rows := make([][]float64, len(got))
		for i, it := range got {
			rows[i] = it.scores
		}
		summed, err := reward.WeightedSums(rows, t.Weights)
		if err != nil {
			return nil, err
		}
		sampled = append(sampled, got...)
		sampledRewards = append(sampledRewards, summed...)
		for g := 0; g < len(got)/n; g++ {
			items := got[g*n : (g+1)*n]
			if !cfg.DynamicSampling {
				batch.Keep(items, summed[g*n:(g+1)*n])
				continue
			}
			if _, err := batch.Add(items, summed[g*n:(g+1)*n]); err != nil {
				return nil, err
			}
		}
	}
	batch.TopUp()
	groups, _ := batch.Groups()
	var trajs []*chat.Trajectory
	var rows [][]float64
	for _, grp := range groups {
		for _, it := range grp {
			trajs = append(trajs, it.traj)
			rows = append(rows, it.scores)
		}
	}
	rewards, err := reward.WeightedSums(rows, t.Weights)
	if err != nil {
		return nil, err
	}
	adv, err := Advantages(rewards, n, cfg.ScaleRewards)
	if err != nil {
		return nil, err
	}
	if t.OnGeneration != nil {
		t.OnGeneration(st.GlobalStep, trajs, rewards)
	}
	gen := &generation{trajs: trajs, advantages: adv.Advantages, samples: t.samples(groups, rewards, adv.Advantages)}
	if gen.metrics, err = sampledMetrics(sampled, sampledRewards, n, cfg.ScaleRewards, t.Rewards); err != nil {
		return nil, err
	}
	gen.baseMicroBatches = len(trajs) / cfg.PerDeviceTrainBatchSize
	if cfg.RecoveryBranching {
		rec, err := t.recover(ctx, groups, int64(st.Rounds))
		st.Rounds++
		if err != nil {
			return nil, err
		}
		gen.addRecovery(rec, cfg.PerDeviceTrainBatchSize)
	}
	trajs = gen.trajs
	if cfg.DynamicSampling {
		gen.metrics["dynamic_sampling/dropped_groups"] = float64(batch.Dropped())
		gen.metrics["dynamic_sampling/kept_reward_mean"] = adv.Reward
	}
	longest := 0
	for _, tr := range trajs {
		longest = max(longest, len(tr.Tokens))
		if !(cfg.MaskTruncatedCompletions && tr.Truncated) {
			for _, m := range tr.Mask {
				gen.numItems += float32(m)
			}
		}
	}
	gen.length = train.SequenceBucket(longest)
	if t.needsOldLogProbs() {
		if gen.old, err = t.batchLogProbs(t.logProbs, gen); err != nil {
			return nil, err
		}
	}
	if cfg.VLLMImportanceSamplingCorrection {
		sampling, mask := gen.samplingLogProbs(cfg)
		if t.isInGraph() {
			// One optimizer step on weights that sampled the batch: the training graph's own forward pass
			// gives the old log-probs, and the graph computes the correction and its metrics (optimizerStep).
			gen.isRatio = sampling
		} else {
			var m map[string]float64
			gen.isRatio, m = cfg.ImportanceSampling(gen.old, sampling, mask, len(gen.trajs), gen.length)
			for k, v := range m {
				gen.metrics[k] = v
			}
		}
	}
	if cfg.Beta > 0 {
		if gen.ref, err = t.batchLogProbs(t.refLogProbs, gen); err != nil {
			return nil, err
		}
	}
	return gen, nil
}

// nextJobs draws the next prompts in TRL's order: a seeded shuffle of the
// tasks per epoch (shuffle_dataset), whole generation batches only.
func (t *Trainer) nextJobs(st *train.State, count int) ([]rollout.Job, error) {
	perEpoch := len(t.Tasks) / count * count
	jobs := make([]rollout.Job, count)
	for i := range jobs {
		q := st.PromptCursor
		st.PromptCursor++
		epoch, pos := q/perEpoch, q%perEpoch
		order := make([]int, len(t.Tasks))
		for j := range order {
			order[j] = j
		}
		if t.Config.ShuffleDataset {
			rng := rand.New(rand.NewPCG(uint64(t.Config.Seed), uint64(epoch)))
			rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		}
		tk := &t.Tasks[order[pos]]
		f := t.Sandboxes[tk.Fixture]
		if f == nil {
			return nil, fmt.Errorf("grpo: task %q: no sandbox for fixture %q", tk.ID, tk.Fixture)
		}
		jobs[i] = rollout.Job{Task: tk, Factory: f}
	}
	return jobs, nil
}

// rollout runs the jobs' trajectories and scores each with every reward
// function while its sandbox is still open. A score is NaN (TRL's None)
// where the function failed, and every score of a trajectory that an
// infrastructure failure ended (leaveOut), its fork's failure included, is
// NaN.
func (t *Trainer) rollout(ctx context.Context, jobs []rollout.Job, round int64) ([]scored, error) {
	r, err := t.runner(round)
	if err != nil {
		return nil, err
	}
	results, err := r.Run(ctx, jobs)
	if err != nil {
		return nil, fmt.Errorf("grpo: rollout: %w", err)
	}
	return t.scoreResults(results), nil
}

// runner is the rollout runner of a generation round: the policy, the
// sampling settings (the round seeds them) and the rewards; with
// recovery_branching, the setback triggers.
func (t *Trainer) runner(round int64) (*rollout.Runner, error) {
	cfg := t.Config
	// TRL's None: no limit but max_completion_length.
	iters := math.MaxInt32
	if cfg.MaxToolCallingIterations != nil {
		iters = *cfg.MaxToolCallingIterations
	}
	r := &rollout.Runner{
		Policy:    &model.Policy{M: t.Model, CompletionSlots: model.CompletionSlots(cfg.MaxCompletionLength, iters)},
		Tokenizer: t.Tokenizer,
		Template:  t.Template,
		Config: rollout.Config{
			NumGenerations:           cfg.NumGenerations,
			MaxPromptLength:          cfg.MaxPromptLength,
			MaxCompletionLength:      cfg.MaxCompletionLength,
			MaxToolCallingIterations: iters,
			Sample: policy.SampleOptions{
				Temperature: cfg.Temperature, TopP: cfg.TopP, TopK: cfg.TopK,
				Seed: cfg.Seed*1_000_003 + round,
			},
		},
		Rewards: t.Rewards,
	}
	if cfg.RecoveryBranching {
		trig, err := rollout.NewTriggers(cfg.RecoveryTriggers)
		if err != nil {
			return nil, fmt.Errorf("grpo: %w", err)
		}
		r.Branching = trig
	}
	return r, nil
}

// scoreResults turns rollout results into scored items, a score NaN where
// its function failed and every score NaN where the trajectory is left out.
func (t *Trainer) scoreResults(results []*rollout.Result) []scored {
	out := make([]scored, len(results))
	for i, res := range results {
		out[i] = scored{traj: res.Trajectory, task: res.Task, scores: make([]float64, len(t.Rewards)), res: res}
		if leaveOut(res.Trajectory) {
			for k := range out[i].scores {
				out[i].scores[k] = math.NaN()
			}
			continue
		}
		for k, f := range t.Rewards {
			if res.Scores == nil || res.Errs[k] != nil {
				out[i].scores[k] = math.NaN()
				if res.Errs != nil && res.Errs[k] != nil && res.Trajectory.Error == "" {
					// The first failing reward's error ends up in the
					// trajectory's record (tools/trajectory_error_rate).
					res.Trajectory.Error = fmt.Sprintf("reward %s: %v", f.Name(), res.Errs[k])
				}
				continue
			}
			out[i].scores[k] = res.Scores[k].Value
		}
	}
	return out
}

// leaveOut masks a trajectory that an infrastructure failure ended (its
// Error: a crashed or hung tool server, a database fork lost and reset
// under it): it is no sample of the policy, so it is not scored (its reward
// is NaN, TRL's None: advantage 0, out of its group's mean and std) and none
// of its tokens are trained on. It reports whether tr was left out.
func leaveOut(tr *chat.Trajectory) bool {
	if tr.Error == "" {
		return false
	}
	for i := range tr.Mask {
		tr.Mask[i] = 0
	}
	return true
}

// sampledMetrics are a step's generation metrics under TRL's keys, over
// every trajectory the step sampled (rewards are their weighted sums, laid
// out in groups of numGenerations): reward, reward_std,
// frac_reward_zero_std (as TRL: the share of completions whose
// advantage scale, by scale_rewards, is zero),
// rewards/NAME/mean|std and trajectoryMetrics'.
func sampledMetrics(sampled []scored, rewards []float64, numGenerations int, scale ScaleRewards, funcs []reward.Func) (map[string]float64, error) {
	st, err := Advantages(rewards, numGenerations, scale)
	if err != nil {
		return nil, err
	}
	m := map[string]float64{
		"reward":               st.Reward,
		"reward_std":           st.RewardStd,
		"frac_reward_zero_std": st.FracRewardZeroStd,
	}
	trajs := make([]*chat.Trajectory, len(sampled))
	col := make([]float64, len(sampled))
	for k, f := range funcs {
		for i, it := range sampled {
			col[i] = it.scores[k]
		}
		m["rewards/"+f.Name()+"/mean"] = nanMean(col)
		m["rewards/"+f.Name()+"/std"] = nanStd(col)
	}
	for i, it := range sampled {
		trajs[i] = it.traj
	}
	for k, v := range trajectoryMetrics(trajs) {
		m[k] = v
	}
	return m, nil
}

// trajectoryMetrics are the completion and tool-use statistics of a batch.
func trajectoryMetrics(trajs []*chat.Trajectory) map[string]float64 {
	var length, truncated, calls, failed, parseErr, ended float64
	for _, tr := range trajs {
		length += float64(len(tr.Tokens) - tr.PromptLen)
		if tr.Truncated {
			truncated++
		}
		if tr.Error != "" {
			ended++
		}
		for _, turn := range tr.Turns {
			for _, c := range turn.Calls {
				calls++
				if c.ParseError != "" {
					parseErr++
				}
				if c.IsError {
					failed++
				}
			}
		}
	}
	n := float64(max(len(trajs), 1))
	m := map[string]float64{
		"completion_length":           length / n,
		"completions/mean_length":     length / n,
		"completions/clipped_ratio":   truncated / n,
		"tools/call_frequency":        calls / n,
		"tools/trajectory_error_rate": ended / n,
	}
	if calls > 0 {
		m["tools/failure_frequency"] = failed / calls
		m["tools/success_rate"] = 1 - failed/calls
		m["tools/parse_error_rate"] = parseErr / calls
	} else {
		m["tools/failure_frequency"] = math.NaN()
		m["tools/success_rate"] = math.NaN()
		m["tools/parse_error_rate"] = math.NaN()
	}
	return m
}

// batchLogProbs runs exec (the policy's or the reference model's
// log-probabilities, no gradient) over every micro-batch of gen.
func (t *Trainer) batchLogProbs(exec *mlctx.Exec, gen *generation) ([]float32, error) {
	bs := t.Config.PerDeviceTrainBatchSize
	out := make([]float32, 0, len(gen.trajs)*gen.length)
	for from := 0; from < len(gen.trajs); from += bs {
		tokens, attn, _, _, _, _, _, err := t.microBatch(gen, from, min(from+bs, len(gen.trajs)))
		if err != nil {
			return nil, err
		}
		res, err := exec.Exec(tokens, attn)
		if err != nil {
			return nil, fmt.Errorf("log-probs: %w", err)
		}
		out = append(out, tensors.MustCopyFlatData[float32](res[0])...)
	}
	return out, nil
}

// microBatch packs completions [from, to) of a generation into tensors.
func (t *Trainer) microBatch(gen *generation, from, to int) (tokens, attn, mask, adv *tensors.Tensor, old, ref, isRatio *tensors.Tensor, err error) {
	seqs := make([][]int, to-from)
	masks := make([][]float32, to-from)
	advs := make([]float32, to-from)
	for b := range seqs {
		tr := gen.trajs[from+b]
		seqs[b] = make([]int, len(tr.Tokens))
		masks[b] = make([]float32, len(tr.Tokens))
		zero := t.Config.MaskTruncatedCompletions && tr.Truncated
		for i, id := range tr.Tokens {
			seqs[b][i] = int(id)
			if !zero {
				masks[b][i] = float32(tr.Mask[i])
			}
		}
		advs[b] = float32(gen.advantages[from+b])
	}
	pad := 0
	if t.Model.Config.PadTokenID != nil {
		pad = *t.Model.Config.PadTokenID
	}
	if tokens, attn, err = model.PadBatch(seqs, gen.length, pad, false); err != nil {
		return
	}
	if mask, err = model.PadFloats(masks, gen.length, false); err != nil {
		return
	}
	adv = tensors.FromFlatDataAndDimensions(advs, len(advs))
	slice := func(all []float32) *tensors.Tensor {
		if all == nil {
			return nil
		}
		return tensors.FromFlatDataAndDimensions(append([]float32(nil), all[from*gen.length:to*gen.length]...), to-from, gen.length)
	}
	return tokens, attn, mask, adv, slice(gen.old), slice(gen.ref), slice(gen.isRatio), nil
}

// lossColumnStep is the granularity of the first column the training graph computes log-probs for.
const lossColumnStep = 64

// maxLossStarts bounds the training graphs compiled for a start column other than 0: each (length, start) pair
// is one more graph in the accumulate and apply executables, whose caches (GoMLX refuses to compile past them)
// get that many more entries than the length buckets had. Pairs beyond it run the whole-sequence graph.
const maxLossStarts = 16

// lossColumns returns the columns of mask [B, T] from the first that is non-zero in any row, rounded down to a
// multiple of lossColumnStep (all of them when none is, or when maxLossStarts other (length, start) pairs are
// compiled already): the training graph computes log-probs for those positions only, as TRL's
// logits_to_keep covers the completion.
func (t *Trainer) lossColumns(mask *tensors.Tensor) *tensors.Tensor {
	from := lossStart(mask)
	if from == 0 {
		return mask
	}
	key := [2]int{mask.Shape().Dim(1), from}
	if !t.lossStarts[key] {
		if len(t.lossStarts) >= maxLossStarts {
			return mask
		}
		if t.lossStarts == nil {
			t.lossStarts = map[[2]int]bool{}
		}
		t.lossStarts[key] = true
	}
	return maskColumns(mask, from)
}

// lossStart is the first column of mask [B, T] that is non-zero in any row, rounded down to a multiple of
// lossColumnStep; 0 when no column is.
func lossStart(mask *tensors.Tensor) int {
	b, t := mask.Shape().Dim(0), mask.Shape().Dim(1)
	flat := tensors.MustCopyFlatData[float32](mask)
	first := t
	for r := range b {
		for c, v := range flat[r*t : r*t+first] {
			if v != 0 {
				first = c
				break
			}
		}
	}
	if first == t {
		return 0
	}
	return first / lossColumnStep * lossColumnStep
}

// maskColumns returns columns from..T-1 of mask [B, T].
func maskColumns(mask *tensors.Tensor, from int) *tensors.Tensor {
	b, t := mask.Shape().Dim(0), mask.Shape().Dim(1)
	flat := tensors.MustCopyFlatData[float32](mask)
	tail := make([]float32, 0, b*(t-from))
	for r := range b {
		tail = append(tail, flat[r*t+from:(r+1)*t]...)
	}
	return tensors.FromFlatDataAndDimensions(tail, b, t-from)
}

// samplingLogProbs lays out the sampler's log-probs of gen's trajectories
// and their loss mask as the training batch holds them ([len(trajs) * length]).
func (gen *generation) samplingLogProbs(cfg *Config) (logp, mask []float32) {
	logp = make([]float32, len(gen.trajs)*gen.length)
	mask = make([]float32, len(gen.trajs)*gen.length)
	for b, tr := range gen.trajs {
		copy(logp[b*gen.length:], tr.OldLogProbs)
		if cfg.MaskTruncatedCompletions && tr.Truncated {
			continue
		}
		for i, m := range tr.Mask {
			mask[b*gen.length+i] = float32(m)
		}
	}
	return logp, mask
}

// optimizerStep runs the gradient_accumulation_steps micro-batches of one
// optimizer step (offset within the generation's cycle) and applies AdamW.
func (t *Trainer) optimizerStep(gen *generation, offset int, lr float64) (loss, gradNorm float64, metrics []map[string]float64, err error) {
	cfg := t.Config
	bs, ga := cfg.PerDeviceTrainBatchSize, cfg.GradientAccumulationSteps
	mbs := gen.stepMicroBatches(offset, ga, bs)
	inGraphIS := t.isInGraph()
	var is isSums
	for k, mb := range mbs {
		tokens, attn, mask, adv, old, ref, isRatio, err := t.microBatch(gen, mb*bs, (mb+1)*bs)
		if err != nil {
			return 0, 0, nil, err
		}
		// The graph reads from the mask's width where the loss starts (see lossColumns).
		args := []any{tokens, attn, t.lossColumns(mask), adv, gen.numItems}
		if old != nil {
			args = append(args, old)
		}
		if ref != nil {
			args = append(args, ref)
		}
		if isRatio != nil {
			args = append(args, isRatio)
		}
		last := k == len(mbs)-1
		exec := t.accumulate
		if last {
			exec = t.apply
			args = append(args, float32(lr))
		}
		res, err := exec.Exec(args...)
		if err != nil {
			return 0, 0, nil, err
		}
		loss += float64(tensors.ToScalar[float32](res[0]))
		m := map[string]float64{}
		keys := metricKeys(cfg)
		for i, key := range keys {
			m[key] = float64(tensors.ToScalar[float32](res[1+i]))
		}
		metrics = append(metrics, m)
		if inGraphIS {
			v := make([]float64, isSumsCount)
			for i := range v {
				v[i] = tensors.ToScalar[float64](res[1+len(keys)+i])
			}
			if k == 0 {
				is = newISSums(v)
			} else {
				is.add(newISSums(v))
			}
		}
		if last {
			gradNorm = float64(tensors.ToScalar[float32](res[len(res)-1]))
		}
	}
	if inGraphIS {
		// Over the whole generation batch, as ImportanceSampling computes them: this is its one step.
		metrics = append(metrics, is.metrics())
	}
	return loss, gradNorm, metrics, nil
}

// metricKeys lists the per-micro-batch metrics the training graph returns.
func metricKeys(cfg *Config) []string {
	keys := []string{"clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean"}
	if cfg.Beta > 0 {
		keys = append(keys, "kl")
	}
	return keys
}

// summary is the line a run ends with: the steps this process ran and
// their speed, the reward from the first to the last logged step, where
// the model is.
func summary(st *train.State, firstStep int, took time.Duration, final string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "done: %d steps", st.GlobalStep)
	if ran := st.GlobalStep - firstStep; ran > 0 {
		if firstStep > 0 {
			fmt.Fprintf(&b, " (resumed at %d: this process ran steps %d-%d)", firstStep, firstStep+1, st.GlobalStep)
		}
		fmt.Fprintf(&b, " in %s, %.2f s/step", took.Round(time.Second), took.Seconds()/float64(ran))
	}
	if h := st.LogHistory; len(h) > 0 {
		first, last := h[0], h[len(h)-1]
		fmt.Fprintf(&b, "; reward %.3f at step %.0f -> %.3f at step %.0f", number(first["reward"]), number(first["step"]), number(last["reward"]), number(last["step"]))
	}
	fmt.Fprintf(&b, "; model in %s", final)
	return b.String()
}

// number reads a logged value (float64, or int for step; nil for NaN),
// as logged or as read back from trainer_state.json.
func number(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int:
		return float64(x)
	}
	return math.NaN()
}
