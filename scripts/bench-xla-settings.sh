#!/usr/bin/env bash
# Settings of XLA's CPU runtime against each other on the tiny model. Each line of $SETTINGS is one setting: shell
# words of NAME=VALUE put into the environment (XLA_FLAGS for XLA's compiler and runtime, GLIBC_TUNABLES for the
# malloc XLA's buffers come from), or "default" for none. For each, one GRPO step benchmark
# (grpo.BenchmarkGRPOStep, 8 x (128 + 128) tokens, 3 timed steps after a compiling one, as scripts/bench-vs-trl.sh
# times mcprl's step) and one sampling run (mcprl model generate, 8 prompts x 128 new tokens, greedy, 4 repeats),
# the settings alternated ROUNDS times (default 2) so each sees the machine's load at about the same moments.
# Each run prints its times, the step process's peak resident memory and the load average before and after; the end gives each setting's range and its
# ratio to the first setting's best. Needs scripts/install-xla.sh's plugin. THREADS (default 2) is GOMAXPROCS.
# MODEL=smollm2 runs both on SmolLM2-135M-Instruct instead (imported from $MCPRL_SMOLLM2_GGUF, .ci/env): the step
# as scripts/bench-smollm2-step.sh times it (LoRA r 16, 8 x (256 + 256) tokens, STEPS timed steps, default 1), the
# sampling with 2 repeats.
#
#   SETTINGS=$'default\nXLA_FLAGS=--xla_cpu_use_xnnpack=true\nGLIBC_TUNABLES=glibc.malloc.hugetlb=1' scripts/bench-xla-settings.sh
#   MODEL=smollm2 SETTINGS=$'GLIBC_TUNABLES=glibc.malloc.hugetlb=1\nLD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1' \
#     scripts/bench-xla-settings.sh   # glibc with huge pages against jemalloc keeping its pages (apt's libjemalloc2)
#
# XLA aborts on a flag its version does not know ("Unknown flag in XLA_FLAGS"); `strings` on the plugin lists them.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS="${THREADS:-2}"
ROUNDS="${ROUNDS:-2}"
SETTINGS="${SETTINGS:-default}"
. scripts/bench-inputs.sh
step_env=() repeat=4 steps=3 what="tiny model, GRPO step 8 x (128 + 128)"
if [ "${MODEL:-tiny}" = smollm2 ]; then
  [ -f .ci/env ] && source .ci/env
  "$work/mcprl" model import --from "${MCPRL_SMOLLM2_GGUF:?set MCPRL_SMOLLM2_GGUF (bash scripts/test-setup.sh writes it to .ci/env)}" \
    --out "$work/model" >/dev/null
  step_env=(MCPRL_BENCH_LORA_R=16 MCPRL_BENCH_PROMPT=256 MCPRL_BENCH_COMPLETION=256) repeat=2 steps="${STEPS:-1}"
  what="SmolLM2-135M-Instruct, LoRA r 16 GRPO step 8 x (256 + 256)"
else
  bench_tiny "$work/model"
fi
GOMLX_BACKEND= "$work/mcprl" model info --engine xla "$work/model" | sed -n 1p | grep -q '^engine: xla' ||
  { echo "bench-xla-settings: the xla engine did not open (scripts/install-xla.sh)" >&2; exit 1; }
prompts=$(bench_prompts)
export GOMAXPROCS="$THREADS"
load() { cut -d' ' -f1 /proc/loadavg; }
# with SETTING CMD...: CMD run with SETTING's assignments in its environment.
with() {
  local s=$1
  shift
  if [ "$s" = default ]; then "$@"; else eval "env $s \"\$@\""; fi
}
mapfile -t settings <<<"$SETTINGS"
echo "machine: $(nproc) cores; $what, $steps timed steps; load average (1, 5, 15 min) at start: $(cut -d' ' -f1-3 /proc/loadavg); ${#settings[@]} settings, $ROUNDS rounds"
for round in $(seq 1 "$ROUNDS"); do
  for i in "${!settings[@]}"; do
    s="${settings[$i]:-default}"
    before=$(load)
    step_ns=$(with "$s" /usr/bin/time -f %M -o "$work/rss" env GOMLX_BACKEND=xla MCPRL_BENCH_MODEL="$work/model" "${step_env[@]}" "$work/grpo.test" -test.run '^$' \
      -test.bench '^BenchmarkGRPOStep$' -test.benchtime "${steps}x" -test.count 1 | awk '/^BenchmarkGRPOStep/ {print $3}')
    gen=$(echo "$prompts" | with "$s" env GOMLX_BACKEND= "$work/mcprl" model generate --engine xla --model "$work/model" --repeat "$repeat" 2>"$work/gen.err") ||
      { cat "$work/gen.err" >&2; exit 1; }
    echo "{\"setting\": $i, \"round\": $round, \"load_before\": $before, \"load_after\": $(load), \"step_ns\": $step_ns, \"step_peak_kib\": $(cat "$work/rss"), \"gen\": $gen}" >>"$work/runs.jsonl"
    python3 - "$work/runs.jsonl" "$s" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])][-1]
print(f"round {r['round']} [{sys.argv[2]}] (load {r['load_before']:.1f} -> {r['load_after']:.1f}): "
      f"GRPO step {r['step_ns'] / 1e9:.3f} s (its process's peak RSS {r['step_peak_kib'] / 2**20:.2f} GiB); sampling {8 * 128 / min(r['gen']['seconds'][1:]):.0f} tokens/s; "
      f"first completion's first ids {r['gen']['completions'][0][:6]}")
PY
  done
done
python3 - "$work/runs.jsonl" "$SETTINGS" <<'PY'
import json, sys
runs, names = [json.loads(l) for l in open(sys.argv[1])], sys.argv[2].split("\n")
by = {i: [r for r in runs if r["setting"] == i] for i in range(len(names))}
base_step = min(r["step_ns"] for r in by[0]) / 1e9
base_tps = max(8 * 128 / min(r["gen"]["seconds"][1:]) for r in by[0])
print("| setting | GRPO step, s | vs first | step's peak RSS, GiB | sampling, tokens/s | vs first | greedy tokens as the first's |")
print("|---|---|---|---|---|---|---|")
for i, name in enumerate(names):
    steps = [r["step_ns"] / 1e9 for r in by[i]]
    tps = [8 * 128 / min(r["gen"]["seconds"][1:]) for r in by[i]]
    same = all(r["gen"]["completions"] == by[0][0]["gen"]["completions"] for r in by[i])
    print(f"| {name or 'default'} | {min(steps):.3f}-{max(steps):.3f} | {base_step / min(steps):.2f}x | "
          f"{min(r['step_peak_kib'] for r in by[i]) / 2**20:.2f}-{max(r['step_peak_kib'] for r in by[i]) / 2**20:.2f} | "
          f"{min(tps):.0f}-{max(tps):.0f} | {max(tps) / base_tps:.2f}x | {'yes' if same else 'no'} |")
print(f"load average during the runs {min(min(r['load_before'], r['load_after']) for r in runs):.1f}-"
      f"{max(max(r['load_before'], r['load_after']) for r in runs):.1f}")
PY
