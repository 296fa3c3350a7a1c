#!/usr/bin/env bash
# One GRPO optimizer step (forward, backward, clipping, AdamW; dapo loss) on SmolLM2-135M-Instruct with a LoRA
# adapter (r 16, lora_alpha 32, q_proj and v_proj) at batch 8 x 512 tokens (256 prompt + 256 completion, loss on
# the completion): BenchmarkGRPOStep on the model `mcprl model import` makes from the GGUF that
# scripts/test-setup.sh installs ($MCPRL_SMOLLM2_GGUF, from .ci/env). Prints the time per step (after one
# untimed step that compiles the graphs) and the peak resident memory of the whole process (/usr/bin/time -v),
# under nice. STEPS (default 1) timed steps; THREADS (default 2) is GOMAXPROCS. Go's collector lets the heap grow
# to twice what is live before it runs (GOGC 100), so the peak varies between runs; GOMEMLIMIT (e.g. 7GiB), read by
# the Go runtime itself, makes it collect before the process passes that size. It runs on simplego;
# GOMLX_BACKEND=xla runs it on the XLA engine (scripts/install-xla.sh), GOMLX_BACKEND=xla:cuda on a GPU.
# MCPRL_BENCH_GRADIENT_CHECKPOINTING=1 times it with gradient_checkpointing on (the attention probabilities
# recomputed in the backward pass), MCPRL_BENCH_BF16=1 with bf16: true (engine xla: frozen weights in bfloat16, the
# linear layers' matmuls on bfloat16 inputs); MCPRL_BENCH_LORA_TARGETS, MCPRL_BENCH_LORA_DROPOUT and MCPRL_BENCH_TOKENS
# change the adapter (grpo/bench_test.go).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f .ci/env ] && source .ci/env
gguf="${MCPRL_SMOLLM2_GGUF:?set MCPRL_SMOLLM2_GGUF (bash scripts/test-setup.sh writes it to .ci/env)}"
STEPS="${STEPS:-1}"
THREADS="${THREADS:-2}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/mcprl" ./cmd/mcprl
go test -c -o "$work/grpo.test" ./grpo
"$work/mcprl" model import --from "$gguf" --out "$work/smollm2" >/dev/null
echo "machine: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB; GOMEMLIMIT ${GOMEMLIMIT:-unset}; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
MCPRL_BENCH_MODEL="$work/smollm2" MCPRL_BENCH_LORA_R=16 MCPRL_BENCH_PROMPT=256 MCPRL_BENCH_COMPLETION=256 GOMAXPROCS="$THREADS" \
  /usr/bin/time -v -o "$work/time.txt" nice -n 10 "$work/grpo.test" -test.run '^$' -test.bench '^BenchmarkGRPOStep$' \
  -test.benchtime "${STEPS}x" -test.v >"$work/bench.txt" 2>&1 || { cat "$work/bench.txt" "$work/time.txt" >&2; exit 1; }
grep -E 'first step|^BenchmarkGRPOStep' "$work/bench.txt"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '/^BenchmarkGRPOStep.*ns\/op/ {printf "SmolLM2-135M, LoRA r 16, batch 8 x 512: %.2f s/step", $3 / 1e9}' "$work/bench.txt"
awk -F': ' '/User time/ {u = $2} /System time/ {s = $2} /Percent of CPU/ {p = $2} /Maximum resident set size/ {r = $2}
  END {printf ", peak RSS %.2f GiB; the whole process (import excluded; compilation, the untimed first step and the timed ones included) used %.0f s of CPU (user + sys) at %s of a core\n", r / 1048576, u + s, p}' "$work/time.txt"
