# What the bench-*.sh scripts run on, sourced from the repository root: $work, a temporary folder removed on exit,
# holding the mcprl binary and the grpo test binary (BenchmarkGRPOStep) built from this checkout; bench_tiny DIR
# writes the default tiny Qwen2 (3.5M parameters over the reduced 2,048-id tokenizer, seed 1) to DIR; bench_prompts
# prints the sampling input of `mcprl model generate`: 8 prompts of 32 ids, 128 new tokens each, greedy.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/mcprl" ./cmd/mcprl
go test -c -o "$work/grpo.test" ./grpo
bench_tiny() { "$work/mcprl" model init --tokenizer tokenizer/small/qwen2.5-2048 --out "$1" --seed 1 >/dev/null; }
bench_prompts() {
  python3 -c 'import json; print(json.dumps({"prompts": [[(i*31+j*7) % 2048 for j in range(32)] for i in range(8)], "max_new_tokens": 128, "temperature": 0}))'
}
