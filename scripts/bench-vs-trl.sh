#!/usr/bin/env bash
# mcprl against TRL and transformers on the same tiny Qwen2 (the default 3.5M-parameter model over the reduced
# 2,048-id tokenizer), batch and hyperparameters, in one run, torch limited to the same threads as mcprl:
#   step:     one GRPO optimizer step (forward, backward, clipping, AdamW), 8 x (128 prompt + 128 completion)
#             tokens, dapo loss: TRL GRPOTrainer._compute_loss + backward + AdamW, against BenchmarkGRPOStep;
#   sampling: 8 prompts of 32 tokens, 128 new tokens each, greedy, KV cache: transformers generate, against
#             mcprl model generate.
# Each side's best of its timed repetitions (after a warm-up) is compared. Needs scripts/test-setup.sh's .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS="${THREADS:-2}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/mcprl" ./cmd/mcprl
"$work/mcprl" model init --tokenizer tokenizer/small/qwen2.5-2048 --out "$work/tiny" --seed 1 >/dev/null

export GOMAXPROCS="$THREADS" OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS" HF_HUB_OFFLINE=1
trl_json=$(.venv/bin/python python/bench/bench_trl.py "$work/tiny" "$THREADS" 2>"$work/trl.err" | tail -1) || { cat "$work/trl.err" >&2; exit 1; }
step_ns=$(MCPRL_BENCH_MODEL="$work/tiny" go test ./grpo -run '^$' -bench '^BenchmarkGRPOStep$' -benchtime 3x -count 1 |
  awk '/^BenchmarkGRPOStep/ {print $3}')
prompts=$(python3 -c 'import json; print(json.dumps({"prompts": [[(i*31+j*7) % 2048 for j in range(32)] for i in range(8)], "max_new_tokens": 128, "temperature": 0}))')
gen_json=$(echo "$prompts" | "$work/mcprl" model generate --model "$work/tiny" --repeat 4)

python3 - "$trl_json" "$step_ns" "$gen_json" "$THREADS" <<'PY'
import json, sys
trl, step_ns, gen, threads = json.loads(sys.argv[1]), float(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
trl_step = min(trl["step_seconds"][1:])
ours_step = step_ns / 1e9
trl_sample = min(trl["sample_seconds"][1:])
ours_sample = min(gen["seconds"][1:])
tokens = 8 * 128
print(f"threads: torch {trl['torch_threads']}, mcprl GOMAXPROCS {threads} (OpenBLAS one thread per call)")
print(f"GRPO step (8 x 256 tokens, fwd + bwd + AdamW): TRL {trl_step:.3f} s, mcprl {ours_step:.3f} s")
print(f"sampling (8 x 128 new tokens, KV cache): transformers {tokens / trl_sample:.0f} tokens/s, mcprl {tokens / ours_sample:.0f} tokens/s")
print(f"mcprl/TRL step speed-up: {trl_step / ours_step:.2f}x; mcprl/transformers sampling speed-up: {trl_sample / ours_sample:.2f}x")
PY
