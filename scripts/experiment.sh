#!/usr/bin/env bash
# The user's experiment, SFT versus GRPO on edge cases, end to end (a benchmark, not a test):
#
#   1. `mcprl tasks generate` on two training fixtures (customers, and taskgen/testdata/oddities): ordinary
#      tasks with a golden happy path (one call, its observation, the answer) and edge cases with only
#      ground_truth_assertions (values in several spellings, NULLs, renamed and look-alike columns, a first
#      query that comes back empty, SQL errors, a linter that fails first).
#   2. per seed: `mcprl model init`, `mcprl sft` on the goldens (it skips the edge cases and says how many),
#      `mcprl train` (GRPO) from the SFT model on all tasks, and the compute control: SFT continued from the
#      SFT model for as many optimizer steps, of as many sequences, as GRPO took.
#   3. `mcprl eval` of the three models on three held-out sets: the hand-written edge cases
#      (examples/experiment/heldout_tasks.jsonl, mostly on the library fixture, which training never sees),
#      tasks generated on the library fixture, and unseen generated tasks on the training fixtures.
#   4. a table of success and self-correction rates, mean and spread over seeds, in $OUT/results.md.
#
#   scripts/experiment.sh                 # 3 seeds; results in runs/experiment/
#   SEEDS="1 2" OUT=runs/exp2 scripts/experiment.sh
#   SIDE_BY_SIDE=0 scripts/experiment.sh  # a seed's stages one at a time (models too big for two at once)
#   PARALLEL=2 scripts/experiment.sh      # two seeds at once (default one; a seed holds ~8 GB: GRPO and an evaluation at ~4 GB each)
#   MODEL=path/to/model.json scripts/experiment.sh    # another model size
#   BASE=DIR SFT_CONFIG=... scripts/experiment.sh     # every seed's SFT starts from the HF model in DIR (a pretrained
#                                         # model, e.g. SmolLM2 imported: scripts/smollm2-experiment.sh) instead of model init
#   PER_CATEGORY=2 N_TRAINED=16 K=1 scripts/experiment.sh   # a smaller evaluation (for slower models)
#   GRPO_CONFIG=FILE CONTROL_CONFIG=FILE scripts/experiment.sh   # other GRPO / compute-control configs
#   GRPO_TASKS=edge GRPO_CONFIG=examples/experiment/grpo-edge.yaml scripts/experiment.sh   # GRPO on the edge cases alone
#   REUSE=runs/experiment GRPO_TASKS=edge GRPO_CONFIG=examples/experiment/grpo-edge.yaml OUT=runs/exp-edge scripts/experiment.sh
#                                         # another GRPO from the same SFT models (their control reused, or trained here
#                                         # if that run has none; all evaluated again). Their tasks must match these as
#                                         # SFT reads them (ids, prompts, goldens); reward-only fields may differ
#   GRPO_EVAL_STEPS="100 200" scripts/experiment.sh   # also evaluate GRPO's checkpoint-100 and -200 (a learning curve)
#   QUICK=1 scripts/experiment.sh         # the whole pipeline in a few minutes (what CI runs)
#   DATA_ONLY=1 OUT=DIR scripts/experiment.sh   # only the fixtures, training tasks and held-out file (for other models)
#   LOOKUP_SHARE=1 scripts/experiment.sh  # goldens of questions about one named row find its key, then query by it (docs/tasks.md)
#   TABLES_SHARE=0.25 scripts/experiment.sh  # goldens of that share of ordinary questions list the tables first (docs/tasks.md)
#   EVAL_MAX_COMPLETION=512 scripts/experiment.sh   # every evaluation's max_completion_length (default 256): room to look and retry
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK="${QUICK:-}"
OUT="${OUT:-runs/experiment}"
MODEL="${MODEL:-examples/experiment/model.json}"
BASE="${BASE:-}" # an HF model folder every seed's SFT starts from, instead of `model init --config $MODEL`
SFT_CONFIG="${SFT_CONFIG:-examples/experiment/sft.yaml}"
GRPO_CONFIG="${GRPO_CONFIG:-examples/experiment/grpo.yaml}"
CONTROL_CONFIG="${CONTROL_CONFIG:-examples/experiment/sft-control.yaml}"
GRPO_TASKS="${GRPO_TASKS:-all}" # all: every training task; edge: only those without a golden trajectory
REUSE="${REUSE:-}"               # another run's folder: take its SFT and control models (the control trained here where it has none), train GRPO, evaluate all
GRPO_EVAL_STEPS="${GRPO_EVAL_STEPS:-}" # GRPO checkpoints (steps, a multiple of save_steps) evaluated besides final
SEEDS="${SEEDS:-1 2 3}"
PARALLEL="${PARALLEL:-1}"
SIDE_BY_SIDE="${SIDE_BY_SIDE:-1}" # 1: a seed's GRPO and compute control run at once; 0: one after another
K="${K:-4}"
LOOKUP_SHARE="${LOOKUP_SHARE:-0}" # tasks generate --lookup-share: goldens that read a key from their first result
TABLES_SHARE="${TABLES_SHARE:-0}" # tasks generate --tables-share: goldens that list the database's tables first
EVAL_MAX_COMPLETION="${EVAL_MAX_COMPLETION:-256}" # eval --max-completion-length, for every model evaluated
N_CUSTOMERS=280 N_ODDITIES=140 N_UNSEEN_CUSTOMERS=600 N_UNSEEN_ODDITIES=351 N_LIBRARY=28 MAX_PER_SET=1000
# unseen questions: at most PER_CATEGORY per fixture and category; N_TRAINED of the training edge cases
PER_CATEGORY="${PER_CATEGORY:-4}" N_TRAINED="${N_TRAINED:-48}"
SFT_STEPS="" GRPO_STEPS="" CONTROL_STEPS=""
if [ -n "$QUICK" ]; then
  SEEDS="${QUICK_SEEDS:-1}" K=1
  N_CUSTOMERS=56 N_ODDITIES=28 N_UNSEEN_CUSTOMERS=14 N_UNSEEN_ODDITIES=14 N_LIBRARY=14 MAX_PER_SET=2 N_TRAINED=2
  SFT_STEPS="--max-steps 4" GRPO_STEPS="--max-steps 2" CONTROL_STEPS="--max-steps 1"
fi
# Go's heap target: without one a GRPO process's RSS grew to 8.7 GB over 40 steps (garbage, collected late);
# with 4 GiB it stayed near 4.1 GB. It changes when memory is collected, not what is computed.
export GOMEMLIMIT="${GOMEMLIMIT:-4GiB}"
mkdir -p "$OUT"
bin="$OUT/mcprl"
go build -o "$bin" ./cmd/mcprl
start=$(date +%s)
: > "$OUT/times.tsv"
load1() { cut -d' ' -f1 /proc/loadavg; }
timed() { # timed NAME command...: runs the command, appends its wall time and the load average around it to times.tsv
  local name=$1 t0 l0
  shift
  t0=$(date +%s) l0=$(load1)
  "$@"
  printf '%s\t%s\t%s\t%s\n' "$name" "$(( $(date +%s) - t0 ))" "$l0" "$(load1)" >> "$OUT/times.tsv"
}
# The machine's load average every 30 s while the experiment runs (wall times mean little without it).
: > "$OUT/load.tsv"
( trap 'kill "$nap" 2>/dev/null; exit 0' TERM
  while :; do printf '%s\t%s\n' "$(( $(date +%s) - start ))" "$(load1)" >> "$OUT/load.tsv"; sleep 30 & nap=$!; wait "$nap"; done ) &
sampler=$!
trap 'kill "$sampler" 2>/dev/null || true' EXIT

# The fixtures, in one folder as --fixtures wants them.
rm -rf "$OUT/fixtures"
mkdir -p "$OUT/fixtures"
cp -r examples/fixtures/customers examples/fixtures/library taskgen/testdata/oddities "$OUT/fixtures/"
fx="$OUT/fixtures"

# Every task gets the held-out tasks' system prompt (the user's: the MCP tools in a few lines).
system=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["system_prompt"])' examples/experiment/heldout_tasks.jsonl)
gen() { "$bin" tasks generate --fixture "$fx/$1" --n "$2" --seed "$3" --system-prompt "$system" --lookup-share "$LOOKUP_SHARE" --tables-share "$TABLES_SHARE" --out "$4"; }
gen customers "$N_CUSTOMERS" 1 "$OUT/train-customers.jsonl"
gen oddities "$N_ODDITIES" 1 "$OUT/train-oddities.jsonl"
cat "$OUT/train-customers.jsonl" "$OUT/train-oddities.jsonl" > "$OUT/train_tasks.jsonl"
case "$GRPO_TASKS" in
  all) cp "$OUT/train_tasks.jsonl" "$OUT/grpo_tasks.jsonl" ;;
  edge) grep -v '"golden":' "$OUT/train_tasks.jsonl" > "$OUT/grpo_tasks.jsonl" ;;
  *) echo "GRPO_TASKS must be all or edge, not $GRPO_TASKS" >&2; exit 2 ;;
esac
# Unseen generated tasks on the training fixtures (another seed, minus every question training saw, at most
# PER_CATEGORY a fixture and category so that no kind of task dominates), and generated tasks on the library
# fixture, which training never sees.
gen customers "$N_UNSEEN_CUSTOMERS" 2 "$OUT/unseen-customers.jsonl"
gen oddities "$N_UNSEEN_ODDITIES" 2 "$OUT/unseen-oddities.jsonl"
gen library "$N_LIBRARY" 3 "$OUT/heldout_library.jsonl"
# One evaluation file: each task's category is prefixed with its set (handwritten/, library/, unseen/ are
# held out; trained/ is a fixed sample of the training edge cases, which GRPO trained on with rewards and SFT
# never saw demonstrated), so that one eval per model reports every set and category.
python3 - "$OUT" "$MAX_PER_SET" "$PER_CATEGORY" "$N_TRAINED" <<'PY'
import collections, json, random, sys
out, cap, per_cat, n_trained = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
train = [json.loads(l) for l in open(f"{out}/train_tasks.jsonl")]
seen = {t["task"] for t in train}
unseen, asked, count = [], set(), collections.Counter()
for f in ("unseen-customers", "unseen-oddities"):
    for l in open(f"{out}/{f}.jsonl"):
        t = json.loads(l)
        key = (t["fixture"], t.get("category"))
        if t["task"] in seen or t["task"] in asked or count[key] >= per_cat:
            continue
        asked.add(t["task"])
        count[key] += 1
        unseen.append(t)
# Edge cases and ordinary tasks alternate, so that a cut set (QUICK) still holds both.
ue, uo = [t for t in unseen if not t.get("golden")], [t for t in unseen if t.get("golden")]
unseen = [t for pair in zip(ue, uo) for t in pair] + ue[len(uo):] + uo[len(ue):]
edge = [t for t in train if not t.get("golden")]
random.Random(1).shuffle(edge)
sets = {
    "handwritten": [json.loads(l) for l in open("examples/experiment/heldout_tasks.jsonl")],
    "library": [json.loads(l) for l in open(f"{out}/heldout_library.jsonl")],
    "unseen": unseen,
    "trained": edge[:n_trained],
}
with open(f"{out}/heldout.jsonl", "w") as w:
    for name, tasks in sets.items():
        for t in tasks[:cap]:
            t["id"] = f"{name}/{t['id']}"  # generated ids repeat across seeds of tasks generate
            t["category"] = f"{name}/{t.get('category') or 'uncategorized'}"
            w.write(json.dumps(t, ensure_ascii=False) + "\n")
print(f"{len(train)} training tasks; evaluated: " + ", ".join(f"{min(cap, len(v))} {k}" for k, v in sets.items()), file=sys.stderr)
PY
[ -n "${DATA_ONLY:-}" ] && { kill "$sampler" 2>/dev/null || true; exit 0; }
# The reused SFT models must have seen these tasks as SFT sees them (ids, prompts, goldens); what only the reward
# reads (assertions, witness_sql) may differ: every model is evaluated again with this binary's reward and tasks.
sft_view() {
  python3 -c 'import json,sys
for l in open(sys.argv[1]):
    t = json.loads(l)
    print(json.dumps([t.get(k) for k in ("id", "system_prompt", "task", "fixture", "golden")], sort_keys=True))' "$1"
}
if [ -n "$REUSE" ] && ! cmp -s <(sft_view "$REUSE/train_tasks.jsonl") <(sft_view "$OUT/train_tasks.jsonl"); then
  echo "REUSE=$REUSE: its SFT models were trained on other tasks than these (another script version or sizes?)" >&2
  exit 2
fi

# seeded CONFIG SEED: the config with its seed replaced (QUICK: small groups, short completions).
seeded() {
  if [ -n "$QUICK" ]; then
    sed -e "s/^seed: .*/seed: $2/" -e 's/^per_device_train_batch_size: .*/per_device_train_batch_size: 4/' -e 's/^save_steps: .*/save_steps: 1/' \
      -e 's/^num_generations: .*/num_generations: 2/' -e 's/^max_completion_length: 256/max_completion_length: 64/' "$1"
  else
    sed "s/^seed: .*/seed: $2/" "$1"
  fi
}
# evaluate SEED NAME [DIR]: model NAME (sft, grpo, sft-control) of SEED, or the model in DIR under that name, on
# every held-out task.
evaluate() {
  local d="$OUT/seed-$1"
  timed "seed-$1 eval $2" "$bin" eval --model "${3:-$d/$2/final}" --tasks "$OUT/heldout.jsonl" --fixtures "$fx" \
    --k "$K" --seed 7 --temperature 0.7 --max-completion-length "$EVAL_MAX_COMPLETION" --max-tool-calling-iterations 3 \
    --output-dir "$d/eval-$2" --json > "$d/eval-$2.json" 2> "$d/eval-$2.log"
}
# run_seed SEED: one seed's models and evaluations, logs in $OUT/seed-SEED/.
run_seed() {
  local s=$1 d="$OUT/seed-$1"
  rm -rf "$d"
  mkdir -p "$d"
  seeded "$SFT_CONFIG" "$s" > "$d/sft.yaml"
  seeded "$GRPO_CONFIG" "$s" > "$d/grpo.yaml"
  seeded "$CONTROL_CONFIG" "$s" > "$d/sft-control.yaml"
  if [ -n "$REUSE" ]; then
    # Another run's SFT and control models (same data): GRPO runs here, and every model is evaluated again
    # with this binary's reward, so a change to the reward since that run cannot skew the comparison.
    local r="$REUSE/seed-$s" f
    for f in init init.log sft.yaml sft sft.log sft-control.yaml sft-control sft-control.log; do
      [ ! -e "$r/$f" ] || cp -r "$r/$f" "$d/$f"
    done
    grep -P "^seed-$s (sft|sft-control)\t" "$REUSE/times.tsv" | sed "s/^seed-$s /seed-$s (reused) /" >> "$OUT/times.tsv" || true
  else
    local init="$d/init"
    if [ -n "$BASE" ]; then
      init="$BASE"
      "$bin" model info "$BASE" > "$d/init.log"
    else
      "$bin" model init --config "$MODEL" --tokenizer tokenizer/small/qwen2.5-2048 --seed "$s" --out "$d/init" > "$d/init.log"
    fi
    # shellcheck disable=SC2086 # *_STEPS are flag pairs or empty
    timed "seed-$s sft" "$bin" sft --config "$d/sft.yaml" --model "$init" --tasks "$OUT/train_tasks.jsonl" --fixtures "$fx" --output-dir "$d/sft" $SFT_STEPS 2> "$d/sft.log"
  fi
  # From the SFT model, side by side (SIDE_BY_SIDE=1, two processes a seed at a time: each holds 1.5-2.5 GB for
  # the tiny model): GRPO then its evaluation; the compute control, then the evaluations of the SFT model and of
  # the control. SIDE_BY_SIDE=0 runs them one at a time, the SFT model's evaluation first (SmolLM2 on XLA: a GRPO
  # process peaked at 15 GB, an evaluation at 9 GB).
  grpo_chain() {
    # shellcheck disable=SC2086
    timed "seed-$s grpo" "$bin" train --config "$d/grpo.yaml" --model "$d/sft/final" --tasks "$OUT/grpo_tasks.jsonl" --fixtures "$fx" --output-dir "$d/grpo" $GRPO_STEPS 2> "$d/grpo.log" || return 1
    evaluate "$s" grpo || return 1
    for n in $GRPO_EVAL_STEPS; do evaluate "$s" "grpo-$n" "$d/grpo/checkpoint-$n" || return 1; done
  }
  control_chain() {
    # shellcheck disable=SC2086
    [ -n "$REUSE" ] && [ -d "$d/sft-control/final" ] || timed "seed-$s sft-control" "$bin" sft --config "$d/sft-control.yaml" --model "$d/sft/final" --tasks "$OUT/train_tasks.jsonl" --fixtures "$fx" --output-dir "$d/sft-control" $CONTROL_STEPS 2> "$d/sft-control.log" || return 1
    evaluate "$s" sft-control
  }
  local failed=0 p
  if [ "$SIDE_BY_SIDE" = 1 ]; then
    ( grpo_chain ) &
    ( control_chain && evaluate "$s" sft ) &
    for p in $(jobs -p); do wait "$p" || failed=1; done
  else
    { evaluate "$s" sft && grpo_chain && control_chain; } || failed=1
  fi
  [ "$failed" = 0 ] || { echo "seed $s: a stage failed (logs in $d)"; return 1; }
  echo "seed $s done after $(( $(date +%s) - start )) s"
}
# Up to PARALLEL seeds side by side. Each seed runs two processes at a time, which keeps 2 cores busy; more
# seeds at once only add memory (GRPO and an evaluation hold ~4 GB each).
pids=()
running() { local n=0 p; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && n=$((n + 1)); done; echo "$n"; }
for s in $SEEDS; do
  while [ "$(running)" -ge "$PARALLEL" ]; do sleep 5; done
  run_seed "$s" > "$OUT/seed-$s.log" 2>&1 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
kill "$sampler" 2>/dev/null || true
cat "$OUT"/seed-*.log
grep -h "skipped" "$OUT"/seed-*/sft.log | head -1
# shellcheck disable=SC2086
python3 scripts/experiment-results.py "$OUT" $SEEDS | tee "$OUT/results.md"
echo "wall time: $(( $(date +%s) - start )) s" | tee -a "$OUT/results.md"
exit "$status"
