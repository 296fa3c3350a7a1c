package grpo

// This file is a generation batch: prompts drawn, trajectories rolled out against live sandboxes
// and scored, advantages, and the metrics TRL logs of what was sampled.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/policy"
	"github.com/mcprl/mcprl/report"
	"github.com/mcprl/mcprl/reward"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/train"
)

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
		summed, err := t.weightedRewards(got)
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
	var items []scored
	for _, grp := range groups {
		for _, it := range grp {
			trajs = append(trajs, it.traj)
			items = append(items, it)
		}
	}
	rewards, err := t.weightedRewards(items)
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
	// The micro-batches the optimizer steps will leave out (zeroAdvantage) need no old log-probs either.
	skip := func(mb int) bool { return t.zeroAdvantage(gen, mb) }
	if t.needsOldLogProbs() {
		if gen.old, err = t.batchLogProbsBut(t.logProbs, gen, skip); err != nil {
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
			gen.isRatio, m = gen.importanceSampling(cfg, sampling, mask, skip)
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
		Policy:    &model.Policy{M: t.SamplingModel(), CompletionSlots: model.CompletionSlots(cfg.MaxCompletionLength, iters)},
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
		r.ForceLook = cfg.RecoveryForcedLook
	}
	return r, nil
}

// weightedRewards is each scored trajectory's reward: its reward functions'
// scores weighted by Weights (NaN where it was left out).
func (t *Trainer) weightedRewards(items []scored) ([]float64, error) {
	rows := make([][]float64, len(items))
	for i, it := range items {
		rows[i] = it.scores
	}
	return reward.WeightedSums(rows, t.Weights)
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
