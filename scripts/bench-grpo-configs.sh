#!/usr/bin/env bash
# GRPO runs of several configs, alternated: where each run's time goes. For each file of CONFIGS, in turn, ROUNDS
# times (default 2): `mcprl train --config C --max-steps STEPS` (default 3) in a fresh output folder, with MODEL,
# TASKS and FIXTURES, where given, overriding the config's (so that every config trains the same model on the same
# tasks). From the run's metrics.jsonl it prints, per config and round, the seconds each step spent generating
# (rollouts, recovery branches, rewards: timing/generation_seconds) and in optimizer steps
# (timing/optimizer_step_seconds), the steps' mean completion length, and the load average before and after. The
# first step compiles XLA's graphs, so compare the later steps. Different configs sample different trajectories:
# compare seconds per step beside the completion lengths, and only configs alternated under the same load.
#
#   MODEL=runs/smollm2-look-s2/seed-2/sft/final TASKS=runs/smollm2-look-s2/grpo_tasks.jsonl \
#     FIXTURES=runs/smollm2-look-s2/fixtures STEPS=3 \
#     CONFIGS="examples/smollm2/grpo-recovery-look.yaml examples/smollm2/grpo-recovery-look-bf16.yaml" \
#     bash scripts/bench-grpo-configs.sh
#   CONFIGS=examples/customers/quick.yaml STEPS=2 ROUNDS=1 bash scripts/bench-grpo-configs.sh   # the tiny main job
#
# Runs under scripts/allocator.sh's allocator, as scripts/smollm2-experiment.sh does; THREADS (default 2) is
# GOMAXPROCS.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CONFIGS:?set CONFIGS to one or more GRPO config files}"
STEPS="${STEPS:-3}" ROUNDS="${ROUNDS:-2}"
export GOMAXPROCS="${THREADS:-2}" GOMEMLIMIT="${GOMEMLIMIT:-6GiB}"
. scripts/allocator.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/mcprl" ./cmd/mcprl
over=()
[ -n "${MODEL:-}" ] && over+=(--model "$MODEL")
[ -n "${TASKS:-}" ] && over+=(--tasks "$TASKS")
[ -n "${FIXTURES:-}" ] && over+=(--fixtures "$FIXTURES")
echo "machine: $(nproc) cores; allocator $(allocator_name); $STEPS steps a run; load average (1, 5, 15 min) at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$ROUNDS"); do
  for c in $CONFIGS; do
    out="$work/run-$round-$(basename "$c" .yaml)"
    before=$(cut -d' ' -f1 /proc/loadavg)
    "$work/mcprl" train --config "$c" "${over[@]}" --max-steps "$STEPS" --output-dir "$out" >"$out.out" 2>"$out.log" ||
      { tail -20 "$out.log" >&2; exit 1; }
    python3 - "$out/metrics.jsonl" "$c" "$round" "$before" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import json, sys
path, config, rnd, before, after = sys.argv[1:]
recs = [json.loads(line) for line in open(path)]
gen = [r.get("timing/generation_seconds", 0.0) for r in recs]
opt = [r.get("timing/optimizer_step_seconds", 0.0) for r in recs]
length = [r.get("completions/mean_length", 0.0) for r in recs]
fmt = lambda xs, f: "[" + ", ".join(f % x for x in xs) + "]"
print(f"round {rnd} {config}: generation s/step {fmt(gen, '%.1f')}, optimizer s/step {fmt(opt, '%.1f')}, "
      f"mean completion length {fmt(length, '%.0f')}; load {before} -> {after}")
PY
  done
done
