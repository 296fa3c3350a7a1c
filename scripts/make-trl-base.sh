#!/usr/bin/env bash
# Rebuilds examples/trl/base, the small policy of the TRL example and its test: examples/customers/base
# (scripts/make-base.sh) warmed up with `mcprl sft` on the prompt TRL's GRPOTrainer renders for
# mcprl_env.Environment's tools, so that under TRL it writes tool calls as it does under mcprl.
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o runs/mcprl ./cmd/mcprl
.venv/bin/python examples/trl/make_sft_tasks.py
rm -rf runs/trl-base-1 runs/trl-base-2
runs/mcprl sft --config examples/trl/base-1.yaml
runs/mcprl sft --config examples/trl/base-2.yaml
rm -rf examples/trl/base
mkdir -p examples/trl/base
cp runs/trl-base-2/final/{config.json,generation_config.json,model.safetensors,tokenizer.json,tokenizer_config.json} examples/trl/base/
echo "wrote examples/trl/base"
