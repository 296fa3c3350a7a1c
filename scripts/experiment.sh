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
#   PARALLEL=1 scripts/experiment.sh      # seeds one at a time (default 2 at once; a seed holds ~4-5 GB)
#   MODEL=path/to/model.json scripts/experiment.sh    # another model size
#   GRPO_CONFIG=FILE CONTROL_CONFIG=FILE scripts/experiment.sh   # other GRPO / compute-control configs
#   QUICK=1 scripts/experiment.sh         # the whole pipeline in a few minutes (what CI runs)
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK="${QUICK:-}"
OUT="${OUT:-runs/experiment}"
MODEL="${MODEL:-examples/experiment/model.json}"
SFT_CONFIG="${SFT_CONFIG:-examples/experiment/sft.yaml}"
GRPO_CONFIG="${GRPO_CONFIG:-examples/experiment/grpo.yaml}"
CONTROL_CONFIG="${CONTROL_CONFIG:-examples/experiment/sft-control.yaml}"
SEEDS="${SEEDS:-1 2 3}"
PARALLEL="${PARALLEL:-2}"
K="${K:-4}"
N_CUSTOMERS=280 N_ODDITIES=140 N_UNSEEN_CUSTOMERS=28 N_UNSEEN_ODDITIES=14 N_LIBRARY=28 MAX_PER_SET=1000
SFT_STEPS="" GRPO_STEPS="" CONTROL_STEPS=""
if [ -n "$QUICK" ]; then
  SEEDS="${QUICK_SEEDS:-1}" K=1
  N_CUSTOMERS=56 N_ODDITIES=28 N_UNSEEN_CUSTOMERS=14 N_UNSEEN_ODDITIES=14 N_LIBRARY=14 MAX_PER_SET=2
  SFT_STEPS="--max-steps 4" GRPO_STEPS="--max-steps 1" CONTROL_STEPS="--max-steps 1"
fi
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
gen() { "$bin" tasks generate --fixture "$fx/$1" --n "$2" --seed "$3" --system-prompt "$system" --out "$4"; }
gen customers "$N_CUSTOMERS" 1 "$OUT/train-customers.jsonl"
gen oddities "$N_ODDITIES" 1 "$OUT/train-oddities.jsonl"
cat "$OUT/train-customers.jsonl" "$OUT/train-oddities.jsonl" > "$OUT/train_tasks.jsonl"
# Unseen generated tasks on the training fixtures (another seed, minus every question training saw), and
# generated tasks on the library fixture, which training never sees.
gen customers "$N_UNSEEN_CUSTOMERS" 2 "$OUT/unseen-customers.jsonl"
gen oddities "$N_UNSEEN_ODDITIES" 2 "$OUT/unseen-oddities.jsonl"
gen library "$N_LIBRARY" 3 "$OUT/heldout_library.jsonl"
# One held-out file: each task's category is prefixed with its set (handwritten/, library/, unseen/), so
# that one eval per model reports every set and category.
python3 - "$OUT" "$MAX_PER_SET" <<'PY'
import json, sys
out, cap = sys.argv[1], int(sys.argv[2])
seen = {json.loads(l)["task"] for l in open(f"{out}/train_tasks.jsonl")}
sets = {
    "handwritten": open("examples/experiment/heldout_tasks.jsonl").readlines(),
    "library": open(f"{out}/heldout_library.jsonl").readlines(),
    "unseen": [l for f in ("unseen-customers", "unseen-oddities") for l in open(f"{out}/{f}.jsonl") if json.loads(l)["task"] not in seen],
}
with open(f"{out}/heldout.jsonl", "w") as w:
    for name, lines in sets.items():
        for l in lines[:cap]:
            t = json.loads(l)
            t["category"] = f"{name}/{t.get('category') or 'uncategorized'}"
            w.write(json.dumps(t, ensure_ascii=False) + "\n")
n = sum(1 for _ in open(f"{out}/train_tasks.jsonl"))
print(f"{n} training tasks; held out: " + ", ".join(f"{min(cap, len(v))} {k}" for k, v in sets.items()), file=sys.stderr)
PY

# seeded CONFIG SEED: the config with its seed replaced (QUICK: small groups, short completions).
seeded() {
  if [ -n "$QUICK" ]; then
    sed -e "s/^seed: .*/seed: $2/" -e 's/^per_device_train_batch_size: .*/per_device_train_batch_size: 4/' \
      -e 's/^num_generations: .*/num_generations: 2/' -e 's/^max_completion_length: 256/max_completion_length: 64/' "$1"
  else
    sed "s/^seed: .*/seed: $2/" "$1"
  fi
}
# evaluate SEED MODEL: MODEL (sft, grpo, sft-control) of SEED on every held-out task.
evaluate() {
  local d="$OUT/seed-$1"
  timed "seed-$1 eval $2" "$bin" eval --model "$d/$2/final" --tasks "$OUT/heldout.jsonl" --fixtures "$fx" \
    --k "$K" --seed 7 --temperature 0.7 --max-completion-length 256 --max-tool-calling-iterations 3 \
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
  "$bin" model init --config "$MODEL" --tokenizer tokenizer/small/qwen2.5-2048 --seed "$s" --out "$d/init" > "$d/init.log"
  # shellcheck disable=SC2086 # *_STEPS are flag pairs or empty
  timed "seed-$s sft" "$bin" sft --config "$d/sft.yaml" --model "$d/init" --tasks "$OUT/train_tasks.jsonl" --fixtures "$fx" --output-dir "$d/sft" $SFT_STEPS 2> "$d/sft.log"
  # From the SFT model, side by side: GRPO then its evaluation; the compute control, then the evaluations of
  # the SFT model and of the control (two processes a seed at a time: each holds 1.5-2.5 GB).
  # shellcheck disable=SC2086
  ( timed "seed-$s grpo" "$bin" train --config "$d/grpo.yaml" --model "$d/sft/final" --tasks "$OUT/train_tasks.jsonl" --fixtures "$fx" --output-dir "$d/grpo" $GRPO_STEPS 2> "$d/grpo.log"
    evaluate "$s" grpo ) &
  # shellcheck disable=SC2086
  ( timed "seed-$s sft-control" "$bin" sft --config "$d/sft-control.yaml" --model "$d/sft/final" --tasks "$OUT/train_tasks.jsonl" --fixtures "$fx" --output-dir "$d/sft-control" $CONTROL_STEPS 2> "$d/sft-control.log"
    evaluate "$s" sft
    evaluate "$s" sft-control ) &
  local failed=0 p
  for p in $(jobs -p); do wait "$p" || failed=1; done
  [ "$failed" = 0 ] || { echo "seed $s: a stage failed (logs in $d)"; return 1; }
  echo "seed $s done after $(( $(date +%s) - start )) s"
}
# Up to PARALLEL seeds side by side (each runs two processes at a time; more seeds at once only add memory:
# three seeds with 32-sequence SFT batches held 15 GB and thrashed a 23 GB machine).
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
python3 - "$OUT" "$MODEL" "$SFT_CONFIG" "$GRPO_CONFIG" "$CONTROL_CONFIG" $SEEDS <<'PY' | tee "$OUT/results.md"
import collections, json, re, statistics, sys
out, model, sft_config, grpo_config, control_config, seeds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]
# Generated edge cases (taskgen.EdgeCases); every hand-written task is an edge case.
EDGE = {"case-variants", "empty-first", "nulls", "renamed-column", "look-alike-column", "sql-error", "lint-first"}
MODELS = [("sft", "SFT"), ("sft-control", "SFT, control (as many more steps)"), ("grpo", "SFT + GRPO")]
SETS = [("handwritten", "hand-written edge cases", None),
        ("library", "generated, library fixture (never trained on): edge cases", True),
        ("library", "generated, library fixture (never trained on): ordinary", False),
        ("unseen", "generated, training fixtures, unseen questions: edge cases", True),
        ("unseen", "generated, training fixtures, unseen questions: ordinary", False)]

def pooled(rep, set_, edge):
    """success, self-correction (with counts) over one set's categories of one kind."""
    cats = [m for c, m in rep["categories"].items()
            if c.split("/")[0] == set_ and (edge is None or (c.split("/", 1)[1] in EDGE) == edge)]
    n = sum(m["n_trajectories"] for m in cats)
    ok = sum(m["n_succeeded"] for m in cats)
    sb = sum(m["n_setback"] for m in cats)
    sc = sum(m["n_self_corrected"] for m in cats)
    return (ok / n if n else float("nan")), (sc / sb if sb else float("nan")), ok, n, sc, sb

def fmt(xs):
    xs = [x for x in xs if x == x]
    if not xs:
        return "-"
    if len(xs) == 1:
        return f"{xs[0]:.3f}"
    return f"{statistics.mean(xs):.3f} ± {statistics.stdev(xs):.3f}"

try:
    size = re.search(r"(\d+) parameters \(([^)]*)\)", open(f"{out}/seed-{seeds[0]}/init.log").read())
    print(f"Model: {model}, {int(size[1]):,} parameters ({size[2]}). Configs: {sft_config}, {grpo_config}, {control_config}.")
except (OSError, TypeError):
    print(f"Model: {model}. Configs: {sft_config}, {grpo_config}, {control_config}.")
print()
print(f"Seeds: {', '.join(seeds)}. Cells: mean ± sample standard deviation over seeds; per seed: success (succeeded/trajectories), self-correction (corrected/setbacks).")
print()
print("| held-out tasks | model | success rate | self-correction rate | per seed |")
print("|---|---|---|---|---|")
for set_, label, edge in SETS:
    for m, name in MODELS:
        succ, corr, per = [], [], []
        for s in seeds:
            try:
                rep = json.load(open(f"{out}/seed-{s}/eval-{m}.json"))
            except (OSError, ValueError):
                per.append(f"{s}: missing")
                continue
            a, c, ok, n, sc, sb = pooled(rep, set_, edge)
            succ.append(a)
            corr.append(c)
            per.append(f"{s}: {ok}/{n}, {sc}/{sb}")
        print(f"| {label} | {name} | {fmt(succ)} | {fmt(corr)} | {'; '.join(per)} |")
print()
# GRPO's training reward: first and last 10 logged steps.
for s in seeds:
    try:
        recs = [json.loads(l) for l in open(f"{out}/seed-{s}/grpo/metrics.jsonl")]
    except OSError:
        continue
    r = [x["reward"] for x in recs if "reward" in x]
    if r:
        k = min(10, len(r))
        print(f"seed {s}: GRPO training reward, first {k} steps {statistics.mean(r[:k]):.3f}, last {k} steps {statistics.mean(r[-k:]):.3f} ({len(r)} steps)")
print()
# GRPO's sampled training groups (completions.jsonl), edge cases and ordinary tasks apart, in windows of
# steps: how often a trajectory succeeded (every assertion held), made more than one tool call,
# and both; and how many groups had no reward spread (no advantage, nothing learned from them).
W = 10
def succeeded(c):
    """every assertion held: execution (or assertions) 1, else a verifiable reward of 1."""
    r = c.get("rewards") or {}
    for name in ("execution", "assertions", "verifiable"):
        if name in r:
            return r[name] >= 0.999
    return c["reward"] >= 0.999
print(f"GRPO's training samples per {W} steps: trajectories succeeded / made >1 call / both; groups with equal rewards.")
print()
print("| seed | steps | edge cases: succeeded | >1 call | both | equal-reward groups | ordinary: succeeded | >1 call | both | equal-reward groups |")
print("|---|---|---|---|---|---|---|---|---|---|")
for s in seeds:
    groups = collections.defaultdict(list)
    try:
        for l in open(f"{out}/seed-{s}/grpo/completions.jsonl"):
            c = json.loads(l)
            groups[(c["step"], c["group"])].append(c)
    except OSError:
        continue
    win = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    for (step, _), cs in groups.items():
        w = win[(step - 1) // W]["edge" if cs[0].get("category") in EDGE else "ordinary"]
        rs = [c["reward"] for c in cs]
        w["groups"] += 1
        w["equal"] += max(rs) - min(rs) < 1e-9
        for c in cs:
            multi = sum(len(t.get("calls") or []) for t in c["turns"]) > 1
            w["n"] += 1
            ok = succeeded(c)
            w["ok"] += ok
            w["multi"] += multi
            w["both"] += multi and ok
    for i in sorted(win):
        cells = []
        for kind in ("edge", "ordinary"):
            w = win[i][kind]
            cells += [f"{w['ok']}/{w['n']}", str(w["multi"]), str(w["both"]), f"{w['equal']}/{w['groups']}"]
        print(f"| {s} | {i * W + 1}-{i * W + W} | " + " | ".join(cells) + " |")
print()
print("| phase | seconds | load average at start, end |")
print("|---|---|---|")
for l in open(f"{out}/times.tsv"):
    name, secs, l0, l1 = l.rstrip("\n").split("\t")
    print(f"| {name} | {secs} | {l0}, {l1} |")
print()
loads = [float(l.split("\t")[1]) for l in open(f"{out}/load.tsv")]
if loads:
    print(f"Load average (1 min) over the run, sampled every 30 s: min {min(loads):.1f}, mean {statistics.mean(loads):.1f}, max {max(loads):.1f} (2 cores).")
PY
echo "wall time: $(( $(date +%s) - start )) s" | tee -a "$OUT/results.md"
exit "$status"
