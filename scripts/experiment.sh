#!/usr/bin/env bash
# The user's experiment end to end: generate training tasks from the customers fixture, SFT a small
# policy on their golden trajectories, run GRPO from the SFT model against live sandboxes, and evaluate
# both on the hand-written held-out edge cases (examples/experiment/heldout_tasks.jsonl, on customers and
# on the library fixture that training never sees). Results land in runs/experiment/.
#   K=4 scripts/experiment.sh
set -euo pipefail
cd "$(dirname "$0")/.."
K="${K:-4}"
out=runs/experiment
mkdir -p "$out"
go build -o "$out/mcprl" ./cmd/mcprl
bin="$out/mcprl"
start=$(date +%s)
# Training tasks get the held-out tasks' system prompt (the user's: the MCP tools in a few lines), so that both
# sides see one prompt format and prompts stay short.
system=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["system_prompt"])' examples/experiment/heldout_tasks.jsonl)
"$bin" tasks generate --fixture examples/fixtures/customers --out "$out/train_tasks.jsonl" --n 128 --seed 1 --system-prompt "$system"
# A second, in-distribution held-out set: generated with another seed, minus any question training saw.
"$bin" tasks generate --fixture examples/fixtures/customers --out "$out/generated_all.jsonl" --n 64 --seed 2 --system-prompt "$system"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
seen = {json.loads(l)["task"] for l in open(f"{out}/train_tasks.jsonl")}
kept = [l for l in open(f"{out}/generated_all.jsonl") if json.loads(l)["task"] not in seen]
open(f"{out}/heldout_generated.jsonl", "w").writelines(kept)
print(f"{len(kept)} generated held-out tasks not seen in training", file=sys.stderr)
PY
rm -rf "$out/init" "$out/sft" "$out/grpo"
"$bin" model init --config examples/customers/base-config.json --tokenizer tokenizer/small/qwen2.5-2048 --seed 1 --out "$out/init"
"$bin" sft --config examples/experiment/sft.yaml
"$bin" train --config examples/experiment/grpo.yaml
# Both models, both held-out sets, the same sampling: K samples per task at temperature $TEMP.
TEMP="${TEMP:-0.7}"
for m in sft grpo; do
  for set in heldout generated; do
    tasks=examples/experiment/heldout_tasks.jsonl
    [ "$set" = generated ] && tasks="$out/heldout_generated.jsonl"
    "$bin" eval --model "$out/$m/final" --tasks "$tasks" --fixtures examples/fixtures \
      --k "$K" --seed 7 --temperature "$TEMP" --max-completion-length 256 --max-tool-calling-iterations 3 \
      --output-dir "$out/eval-$m-$set" --json > "$out/eval-$m-$set.json"
  done
done
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
keys = ["success_rate", "pass_at_k", "tool_accuracy", "hallucination_rate", "format_error_rate", "mean_turns", "self_correction_rate"]
print("| tasks | model | " + " | ".join(keys) + " |")
print("|---" * (len(keys) + 2) + "|")
for set, label in [("heldout", "hand-written edge cases (16)"), ("generated", "generated, unseen")]:
    for m, name in [("sft", "SFT"), ("grpo", "SFT + GRPO")]:
        r = json.load(open(f"{out}/eval-{m}-{set}.json"))
        cells = ["-" if r.get(k) is None else f"{r[k]:.3f}" for k in keys]
        print(f"| {label} | {name} | " + " | ".join(cells) + " |")
PY
echo "wall time: $(( $(date +%s) - start )) s"
