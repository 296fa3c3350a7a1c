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
# Both sides run under scripts/allocator.sh's allocator (MCPRL_ALLOCATOR: glibc, the default, glibc's malloc with
# huge pages; jemalloc preloads libjemalloc2 with its pages kept; auto takes jemalloc where installed), named first.
#
# TRL=1 times TRL + PEFT's step on the same model, batch and adapter beside it (python/bench/bench_trl.py
# --lora-r 16: GRPOTrainer._compute_loss, backward, clipping, AdamW; float32; the same gradient_checkpointing;
# torch given THREADS threads, under the same nice), the two sides alternated RUNS times (default 2), and prints
# each run's ratio with the load average around it, then the best of each side (needs scripts/test-setup.sh's .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f .ci/env ] && source .ci/env
gguf="${MCPRL_SMOLLM2_GGUF:?set MCPRL_SMOLLM2_GGUF (bash scripts/test-setup.sh writes it to .ci/env)}"
STEPS="${STEPS:-1}"
THREADS="${THREADS:-2}"
. scripts/bench-inputs.sh
. scripts/allocator.sh
"$work/mcprl" model import --from "$gguf" --out "$work/smollm2" >/dev/null
echo "machine: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB; GOMEMLIMIT ${GOMEMLIMIT:-unset}; allocator $(allocator_name); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
mcprl_step() {
  MCPRL_BENCH_MODEL="$work/smollm2" MCPRL_BENCH_LORA_R=16 MCPRL_BENCH_PROMPT=256 MCPRL_BENCH_COMPLETION=256 GOMAXPROCS="$THREADS" \
    /usr/bin/time -v -o "$work/time.txt" nice -n 10 "$work/grpo.test" -test.run '^$' -test.bench '^BenchmarkGRPOStep$' \
    -test.benchtime "${STEPS}x" -test.v >"$work/bench.txt" 2>&1 || { cat "$work/bench.txt" "$work/time.txt" >&2; exit 1; }
}
if [ "${TRL:-0}" != 1 ]; then
  mcprl_step
  grep -E 'first step|^BenchmarkGRPOStep' "$work/bench.txt"
  echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  awk '/^BenchmarkGRPOStep.*ns\/op/ {printf "SmolLM2-135M, LoRA r 16, batch 8 x 512: %.2f s/step", $3 / 1e9}' "$work/bench.txt"
  awk -F': ' '/User time/ {u = $2} /System time/ {s = $2} /Percent of CPU/ {p = $2} /Maximum resident set size/ {r = $2}
    END {printf ", peak RSS %.2f GiB; the whole process (import excluded; compilation, the untimed first step and the timed ones included) used %.0f s of CPU (user + sys) at %s of a core\n", r / 1048576, u + s, p}' "$work/time.txt"
  exit 0
fi

gc=()
[ "${MCPRL_BENCH_GRADIENT_CHECKPOINTING:-0}" = 1 ] && gc=(--gradient-checkpointing)
for run in $(seq 1 "${RUNS:-2}"); do
  before=$(cut -d' ' -f1 /proc/loadavg)
  trl_json=$(OMP_NUM_THREADS="$THREADS" HF_HUB_OFFLINE=1 nice -n 10 .venv/bin/python python/bench/bench_trl.py "$work/smollm2" "$THREADS" \
    --prompt 256 --completion 256 --lora-r 16 --steps "$STEPS" --no-sampling "${gc[@]}" 2>"$work/trl.err" | tail -1) || { cat "$work/trl.err" >&2; exit 1; }
  mcprl_step
  ours=$(awk '/^BenchmarkGRPOStep.*ns\/op/ {print $3 / 1e9}' "$work/bench.txt")
  peak=$(awk -F': ' '/Maximum resident set size/ {print $2 / 1048576}' "$work/time.txt")
  echo "{\"run\": $run, \"load_before\": $before, \"load_after\": $(cut -d' ' -f1 /proc/loadavg), \"trl\": $trl_json, \"mcprl_s\": $ours, \"mcprl_peak_gib\": $peak}" >>"$work/runs.jsonl"
  python3 - "$work/runs.jsonl" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])][-1]
trl = min(r["trl"]["step_seconds"][1:])
print(f"run {r['run']} (load {r['load_before']:.1f} -> {r['load_after']:.1f}): SmolLM2 LoRA r 16 GRPO step, 8 x 512: "
      f"TRL + PEFT {trl:.2f} s (peak RSS {r['trl']['peak_rss_gib']:.2f} GiB), mcprl {r['mcprl_s']:.2f} s "
      f"(peak RSS {r['mcprl_peak_gib']:.2f} GiB): {trl / r['mcprl_s']:.2f}x")
PY
done
python3 - "$work/runs.jsonl" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
trl = [min(r["trl"]["step_seconds"][1:]) for r in runs]
ours = [r["mcprl_s"] for r in runs]
ratios = [a / b for a, b in zip(trl, ours)]
t = runs[0]["trl"]
print(f"TRL: torch {t['torch_threads']} threads, {t['trainable_parameters']:,} trainable parameters, gradient checkpointing "
      f"{t['gradient_checkpointing']}, mixed precision {t['mixed_precision']}")
print(f"per-run ratios over {len(runs)} runs: {min(ratios):.2f}-{max(ratios):.2f}x; load average during the runs "
      f"{min(min(r['load_before'], r['load_after']) for r in runs):.1f}-{max(max(r['load_before'], r['load_after']) for r in runs):.1f}")
print(f"mcprl/TRL + PEFT SmolLM2 step speed-up: {min(trl) / min(ours):.2f}x (best {min(ours):.2f} s against {min(trl):.2f} s)")
PY
