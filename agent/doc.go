// Package agent runs a policy as an interactive agent against a live
// sandbox: each question is one rollout (the same loop that trains and
// evaluates, in its own fork of the fixture's database), and Transcript
// writes what happened: every tool call, its result, and the answer.
package agent
