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
"$bin" tasks generate --fixture examples/fixtures/customers --out "$out/train_tasks.jsonl" --n 64 --seed 1 --system-prompt "$system"
rm -rf "$out/init" "$out/sft" "$out/grpo"
"$bin" model init --config examples/customers/base-config.json --tokenizer tokenizer/small/qwen2.5-2048 --seed 1 --out "$out/init"
"$bin" sft --config examples/experiment/sft.yaml
"$bin" train --config examples/experiment/grpo.yaml
for m in sft grpo; do
  "$bin" eval --model "$out/$m/final" --tasks examples/experiment/heldout_tasks.jsonl --fixtures examples/fixtures \
    --k "$K" --seed 7 --max-completion-length 256 --max-tool-calling-iterations 3 \
    --output-dir "$out/eval-$m" --json > "$out/eval-$m.json"
done
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
rows = [("SFT", json.load(open(f"{out}/eval-sft.json"))), ("SFT + GRPO", json.load(open(f"{out}/eval-grpo.json")))]
keys = ["success_rate", "pass_at_k", "tool_accuracy", "hallucination_rate", "format_error_rate", "mean_turns", "self_correction_rate"]
print("| model | " + " | ".join(keys) + " |")
print("|---" * (len(keys) + 1) + "|")
for name, r in rows:
    cells = ["-" if r.get(k) is None else f"{r[k]:.3f}" for k in keys]
    print(f"| {name} | " + " | ".join(cells) + " |")
PY
echo "wall time: $(( $(date +%s) - start )) s"
