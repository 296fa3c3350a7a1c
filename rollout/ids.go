package rollout

// Token ids are the tokenizer's []int in this package and the policies (policy.Policy, model.Session). Two types
// alone hold them as int32: chat.Trajectory.Tokens and Script.Scripts, as the trainers that read and build them
// (sft's Example.Tokens and golden scripts, grpo's batches) take them. TrajectoryIDs and policyIDs are the only
// conversions between the two forms, at that boundary; internal/layers' TestOneTokenIDConversion fails on
// another.

// TrajectoryIDs converts token ids to chat.Trajectory.Tokens' and Script.Scripts' int32.
func TrajectoryIDs(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// policyIDs converts a trajectory's or a script's int32 ids to the policies' ids.
func policyIDs(ids []int32) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}
