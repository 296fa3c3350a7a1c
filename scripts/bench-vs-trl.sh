#!/usr/bin/env bash
# mcprl against TRL and transformers on the same tiny Qwen2 (the default 3.5M-parameter model over the reduced
# 2,048-id tokenizer), batch and hyperparameters, in one run, torch limited to the same threads as mcprl:
#   step:     one GRPO optimizer step (forward, backward, clipping, AdamW), 8 x (128 prompt + 128 completion)
#             tokens, dapo loss: TRL GRPOTrainer._compute_loss + backward + AdamW, against BenchmarkGRPOStep
#             (the trainer's own graphs, on the engine `mcprl train` uses);
#   sampling: 8 prompts of 32 tokens, 128 new tokens each, greedy, KV cache: transformers generate, against
#             mcprl model generate.
# The two sides alternate RUNS times (default 2), so both see the machine's load at about the same moments; each
# run prints its ratios and the load average (1 minute) before and after it. The last line compares each side's
# best timed repetition over all runs (after a warm-up per run); the line before gives the range of the per-run
# ratios. THREADS (default 2) is torch's thread count and mcprl's GOMAXPROCS. ENGINE (default auto: XLA where
# scripts/install-xla.sh installed its plugin, else simplego; or xla, simplego) is mcprl's engine, resolved once
# and used by both sides (the step through $GOMLX_BACKEND, sampling through --engine); SAMPLING_ENGINE (default:
# ENGINE's) is the engine mcprl samples on, as `sampling_engine` makes `mcprl train` sample on a copy of the weights
# there (a refresh of the copy, milliseconds, is not in either number). TRL's step runs in float32 as mcprl's does
# (GRPOConfig's bf16 defaults to True: CPU autocast to bfloat16, fast only where the CPU has bfloat16 instructions);
# TRL_BF16=1 measures TRL's default instead. MODEL (a model directory in Hugging Face's format, e.g. the SmolLM2 that
# `mcprl model import` makes) runs both sides on that model instead of the tiny one: every weight trained, the same
# shapes. Needs scripts/test-setup.sh's .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS="${THREADS:-2}"
RUNS="${RUNS:-2}"
. scripts/bench-inputs.sh
model="${MODEL:-$work/tiny}"
[ -n "${MODEL:-}" ] || bench_tiny "$model"
engine=$(GOMLX_BACKEND= "$work/mcprl" model info --engine "${ENGINE:-auto}" "$model" | sed -n '1s/^engine: \([a-z]*\).*/\1/p')
case "$engine" in
  xla) gomlx_backend=xla ;;
  simplego) gomlx_backend=go ;;
  *) echo "bench-vs-trl: engine ${ENGINE:-auto} did not open" >&2; exit 1 ;;
esac
sampling=$(GOMLX_BACKEND= "$work/mcprl" model info --engine "${SAMPLING_ENGINE:-$engine}" "$model" | sed -n '1s/^engine: \([a-z]*\).*/\1/p')
[ -n "$sampling" ] || { echo "bench-vs-trl: sampling engine ${SAMPLING_ENGINE} did not open" >&2; exit 1; }
prompts=$(bench_prompts)

trl_precision=fp32
[ "${TRL_BF16:-0}" = 1 ] && trl_precision=bf16
export GOMAXPROCS="$THREADS" OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS" HF_HUB_OFFLINE=1
load() { cut -d' ' -f1 /proc/loadavg; }
echo "machine: $(nproc) cores; mcprl engine: $engine, sampling on $sampling; load average (1, 5, 15 min) at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for run in $(seq 1 "$RUNS"); do
  before=$(load)
  trl_json=$(.venv/bin/python python/bench/bench_trl.py "$model" "$THREADS" "$trl_precision" 2>"$work/trl.err" | tail -1) || { cat "$work/trl.err" >&2; exit 1; }
  step_ns=$(GOMLX_BACKEND="$gomlx_backend" MCPRL_BENCH_MODEL="$model" "$work/grpo.test" -test.run '^$' -test.bench '^BenchmarkGRPOStep$' -test.benchtime 3x -test.count 1 |
    awk '/^BenchmarkGRPOStep/ {print $3}')
  gen_json=$(echo "$prompts" | GOMLX_BACKEND= "$work/mcprl" model generate --engine "$sampling" --model "$model" --repeat 4 2>"$work/gen.err") || { cat "$work/gen.err" >&2; exit 1; }
  echo "{\"run\": $run, \"load_before\": $before, \"load_after\": $(load), \"trl\": $trl_json, \"step_ns\": $step_ns, \"gen\": $gen_json}" >>"$work/runs.jsonl"
  python3 - "$work/runs.jsonl" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])][-1]
trl, ours, ts, os_ = min(r["trl"]["step_seconds"][1:]), r["step_ns"] / 1e9, min(r["trl"]["sample_seconds"][1:]), min(r["gen"]["seconds"][1:])
print(f"run {r['run']} (load {r['load_before']:.1f} -> {r['load_after']:.1f}): GRPO step TRL {trl:.3f} s, mcprl {ours:.3f} s ({trl / ours:.2f}x); "
      f"sampling transformers {8 * 128 / ts:.0f} tokens/s, mcprl {8 * 128 / os_:.0f} tokens/s ({ts / os_:.2f}x)")
PY
done

python3 - "$work/runs.jsonl" "$THREADS" <<'PY'
import json, sys
runs, threads = [json.loads(l) for l in open(sys.argv[1])], sys.argv[2]
trl_steps = [min(r["trl"]["step_seconds"][1:]) for r in runs]
our_steps = [r["step_ns"] / 1e9 for r in runs]
trl_samples = [min(r["trl"]["sample_seconds"][1:]) for r in runs]
our_samples = [min(r["gen"]["seconds"][1:]) for r in runs]
step_ratios = [a / b for a, b in zip(trl_steps, our_steps)]
sample_ratios = [a / b for a, b in zip(trl_samples, our_samples)]
tokens = 8 * 128
print(f"threads: torch {runs[0]['trl']['torch_threads']}, mcprl GOMAXPROCS {threads} (OpenBLAS one thread per call); "
      f"TRL's mixed precision: {runs[0]['trl'].get('mixed_precision', 'no')}, mcprl float32")
print(f"GRPO step (8 x 256 tokens, fwd + bwd + AdamW), best of {len(runs)} runs: TRL {min(trl_steps):.3f} s, mcprl {min(our_steps):.3f} s")
print(f"sampling (8 x 128 new tokens, KV cache), best of {len(runs)} runs: transformers {tokens / min(trl_samples):.0f} tokens/s, mcprl {tokens / min(our_samples):.0f} tokens/s")
print(f"per-run ratios over {len(runs)} runs: step {min(step_ratios):.2f}-{max(step_ratios):.2f}x, sampling {min(sample_ratios):.2f}-{max(sample_ratios):.2f}x; "
      f"load average during the runs {min(min(r['load_before'], r['load_after']) for r in runs):.1f}-{max(max(r['load_before'], r['load_after']) for r in runs):.1f}")
print(f"mcprl/TRL step speed-up: {min(trl_steps) / min(our_steps):.2f}x; mcprl/transformers sampling speed-up: {min(trl_samples) / min(our_samples):.2f}x")
PY
