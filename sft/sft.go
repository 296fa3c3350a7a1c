package sft

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:staticcheck // GoMLX graph code reads best with the dot import.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/mcprl/mcprl/model"
	"github.com/mcprl/mcprl/report"
	"github.com/mcprl/mcprl/rollout"
	"github.com/mcprl/mcprl/sampling"
	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/tokenizer"
	"github.com/mcprl/mcprl/toolcall"
	"github.com/mcprl/mcprl/train"
)

// Example is one tokenized golden trajectory.
type Example struct {
	TaskID string
	Tokens []int
	Mask   []uint8 // 1 on the assistant's tokens: what the loss covers
	// Sample is the replayed trajectory as a run saves it (completions.jsonl) when a logging step
	// trained on it.
	Sample report.Completion
}

// Demonstrated returns the jobs whose task has a golden trajectory, and
// how many it left out: edge-case tasks carry only assertions (a verifier
// is cheaper than a demonstration), which GRPO can use and SFT cannot.
func Demonstrated(jobs []rollout.Job) (kept []rollout.Job, skipped int) {
	for _, j := range jobs {
		if len(j.Task.Golden) == 0 {
			skipped++
			continue
		}
		kept = append(kept, j)
	}
	return kept, skipped
}

// Examples replays the golden trajectory of every task through the rollout
// loop, against each task's live sandbox, and returns the token streams.
func Examples(ctx context.Context, tok *tokenizer.Tokenizer, tpl *tokenizer.Template, jobs []rollout.Job, maxPrompt, maxCompletion int) ([]Example, error) {
	scripts := make([][][]int, len(jobs))
	iters := 0
	for i, j := range jobs {
		turns, err := task.GoldenTurns(j.Task, toolcall.RenderCall)
		if err != nil {
			return nil, err
		}
		iters = max(iters, len(turns))
		for _, s := range turns {
			scripts[i] = append(scripts[i], tok.Encode(s))
		}
	}
	r := &rollout.Runner{
		Policy:    &rollout.Script{Scripts: scripts},
		Tokenizer: tok,
		Template:  tpl,
		Config: rollout.Config{
			NumGenerations: 1, MaxPromptLength: maxPrompt, MaxCompletionLength: maxCompletion,
			MaxToolCallingIterations: iters,
		},
	}
	trajs, err := r.Run(ctx, jobs)
	if err != nil {
		return nil, fmt.Errorf("sft: replay golden trajectories: %w", err)
	}
	out := make([]Example, 0, len(trajs))
	for i, tr := range trajs {
		if tr.Error != "" {
			return nil, fmt.Errorf("sft: task %q: golden trajectory failed: %s", jobs[i].Task.ID, tr.Error)
		}
		if tr.Truncated {
			return nil, fmt.Errorf("sft: task %q: golden trajectory does not fit max_completion_length %d", jobs[i].Task.ID, maxCompletion)
		}
		tk := jobs[i].Task
		out = append(out, Example{TaskID: tk.ID, Tokens: tr.Tokens, Mask: tr.Mask, Sample: report.Completion{
			TaskID: tk.ID, Category: tk.Category, Prompt: tk.Task, Turns: tr.Records(),
		}})
	}
	return out, nil
}

// Trainer minimizes the mean negative log-likelihood of the assistant's
// tokens of the examples, with the same optimizer (AdamW, clipping,
// schedule), metrics file and checkpoints as GRPO.
type Trainer struct {
	Config       *Config
	Model        *model.Model
	TokenizerDir string
	Examples     []Example
	Progress     io.Writer
	// SystemPrompt is the system prompt the examples' tasks share ("" when
	// none or they differ; task.SharedSystemPrompt): recorded with the token
	// budgets in trainer_state.json's "generation" (sampling.Settings; SFT
	// samples nothing, so no sampling settings), for whoever samples the
	// model (mcprl chat).
	SystemPrompt string
}

// Train runs max_steps optimizer steps (or num_train_epochs over the
// examples), logging to metrics.jsonl, saving checkpoint-STEP/ every
// save_steps and final/ at the end.
func (t *Trainer) Train(ctx context.Context) error {
	args := &t.Config.Arguments
	if len(t.Examples) == 0 {
		return fmt.Errorf("sft: no examples")
	}
	bs := args.PerDeviceTrainBatchSize
	perEpoch := max(len(t.Examples)/bs, 1)
	total := args.MaxSteps
	if total <= 0 {
		total = int(math.Ceil(args.NumTrainEpochs * float64(perEpoch)))
	}
	vars := train.TrainableVariables(t.Model)
	opt := args.Optimizer()
	t.Model.SetGradientCheckpointing(args.GradientCheckpointing)
	if err := t.Model.SetBF16(args.BF16); err != nil {
		return fmt.Errorf("sft: %w", err)
	}
	exec, err := mlctx.NewExec(t.Model.Backend, t.Model.Ctx, func(ctx *mlctx.Context, tokens, attn, mask, lr *Node) (*Node, *Node) {
		ctx.SetTraining(tokens.Graph(), true) // a LoRA adapter's dropout acts here, as in TRL's train mode
		logp := t.Model.TokenLogProbs(ctx, tokens, attn)
		count := Max(ReduceAllSum(mask), OnesLike(ReduceAllSum(mask)))
		loss := Div(Neg(ReduceAllSum(Mul(logp, mask))), count)
		g := logp.Graph()
		nodes := make([]*Node, len(vars))
		for i, v := range vars {
			nodes[i] = v.ValueGraph(g)
		}
		norm, err := opt.ApplyGraph(ctx, vars, Gradient(loss, nodes...), lr)
		if err != nil {
			panic(err)
		}
		return loss, ConvertDType(norm, loss.DType())
	})
	if err != nil {
		return fmt.Errorf("sft: %w", err)
	}

	pad := 0
	if t.Model.Config.PadTokenID != nil {
		pad = *t.Model.Config.PadTokenID
	}
	rng := rand.New(rand.NewPCG(uint64(args.Seed), 0x736674)) // "sft"
	order := rng.Perm(len(t.Examples))
	step := func(ctx context.Context, st *train.State, lr float64, _ *train.LogWindow) (train.StepResult, error) {
		s := st.GlobalStep
		seqs := make([][]int, bs)
		masks := make([][]float32, bs)
		samples := make([]report.Completion, bs)
		for b := range seqs {
			k := s*bs + b
			if k%len(order) == 0 && k > 0 {
				order = rng.Perm(len(t.Examples))
			}
			ex := t.Examples[order[k%len(order)]]
			samples[b] = ex.Sample
			samples[b].Step, samples[b].Group = s+1, b
			seqs[b] = ex.Tokens
			masks[b] = make([]float32, len(ex.Tokens))
			for i := range ex.Tokens {
				masks[b][i] = float32(ex.Mask[i])
			}
		}
		// Each batch pads to its own longest sequence's bucket (a multiple of 64): a few compiled shapes, and
		// short batches do not pay for the longest example's attention.
		longest := 0
		for _, q := range seqs {
			longest = max(longest, len(q))
		}
		length := train.SequenceBucket(longest)
		tokens, attn, err := model.PadBatch(seqs, length, pad, false)
		if err != nil {
			return train.StepResult{}, err
		}
		mask, err := model.PadFloats(masks, length, false)
		if err != nil {
			return train.StepResult{}, err
		}
		res, err := exec.Exec(tokens, attn, mask, float32(lr))
		if err != nil {
			return train.StepResult{}, err
		}
		return train.StepResult{
			Loss: float64(tensors.ToScalar[float32](res[0])), GradNorm: float64(tensors.ToScalar[float32](res[1])), Samples: samples,
		}, nil
	}
	loop := &train.Loop{
		Args: args, Model: t.Model, TokenizerDir: t.TokenizerDir,
		TotalSteps: total, StepsPerEpoch: perEpoch, Label: "sft", Progress: t.Progress,
	}
	st := &train.State{}
	trained := &sampling.Settings{MaxPromptLength: t.Config.MaxPromptLength, MaxCompletionLength: t.Config.MaxCompletionLength, SystemPrompt: t.SystemPrompt}
	if st.Generation, err = trained.JSONOf("max_prompt_length", "max_completion_length", "system_prompt"); err != nil {
		return fmt.Errorf("sft: %w", err)
	}
	if err := loop.Run(ctx, st, step); err != nil {
		return fmt.Errorf("sft: %w", err)
	}
	return nil
}
