package grpo

import (
	"math"

	"github.com/mcprl/mcprl/report"
)

// samples returns a generation batch's trajectories as a run saves them at a logging step
// (completions.jsonl): group by group, each with its task, every reward function's score, the weighted
// reward and the advantage. rewards and advantages follow the groups' order.
func (t *Trainer) samples(groups [][]scored, rewards, advantages []float64) []report.Completion {
	var out []report.Completion
	i := 0
	for g, grp := range groups {
		for j, it := range grp {
			out = append(out, t.sample(it, g, j, rewards[i], advantages[i]))
			i++
		}
	}
	return out
}

// sample is one scored trajectory as completions.jsonl records it: index j of group g, with every
// reward function's score, the weighted reward and the advantage.
func (t *Trainer) sample(it scored, g, j int, reward, advantage float64) report.Completion {
	c := report.Completion{
		Group: g, Index: j, TaskID: it.task.ID, Category: it.task.Category, Prompt: it.task.Task,
		Turns: it.traj.Records(), Truncated: it.traj.Truncated, Error: it.traj.Error,
		Rewards: map[string]*float64{}, Reward: jsonNumber(reward), Advantage: jsonNumber(advantage),
	}
	for k, f := range t.Rewards {
		c.Rewards[f.Name()] = jsonNumber(it.scores[k])
	}
	return c
}

// samplesAt returns the generation's samples stamped with the logging step.
func (g *generation) samplesAt(step int) []report.Completion {
	out := make([]report.Completion, len(g.samples))
	for i, c := range g.samples {
		c.Step = step
		out[i] = c
	}
	return out
}

// jsonNumber is v for JSON: nil (null) when NaN or infinite.
func jsonNumber(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
