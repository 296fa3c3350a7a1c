#!/usr/bin/env bash
# Rebuilds examples/customers/base, the small policy the quick GRPO example starts from:
# random weights (mcprl model init), then the SFT warm-up of examples/customers/base.yaml.
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o runs/mcprl ./cmd/mcprl
rm -rf runs/base-init runs/base-sft
runs/mcprl model init --config examples/customers/base-config.json --tokenizer tokenizer/small/qwen2.5-2048 --seed 1 --out runs/base-init
runs/mcprl sft --config examples/customers/base.yaml
rm -rf examples/customers/base
mkdir -p examples/customers/base
cp runs/base-sft/final/{config.json,generation_config.json,model.safetensors,tokenizer.json,tokenizer_config.json} examples/customers/base/
echo "wrote examples/customers/base"
