#!/usr/bin/env bash
# Decoding throughput by batch size and weight dtype: `mcprl model generate` (one KV-cache session, greedy, 32-id
# prompts, NEW new tokens each, default 128) on XLA, for every batch of $BATCHES (default "8 16 32") in float32 and,
# with DTYPES="f32 bf16", with every weight in bfloat16 (--bf16). The cases alternate ROUNDS times (default 2), so
# each sees the machine's load at about the same moments; each prints new tokens per second of its best repeat (2
# repeats, the first after compilation) and the load average before and after. A step of decoding reads every
# weight once whatever the batch, so where it is bound by memory a larger batch (TRL's generation_batch_size: the
# sequences one generation samples together) or bfloat16 weights give more tokens a second.
#
#   MODEL=smollm2 scripts/bench-decode.sh                      # SmolLM2-135M-Instruct ($MCPRL_SMOLLM2_GGUF, .ci/env)
#   MODEL=smollm2 DTYPES="f32 bf16" BATCHES="8 32" scripts/bench-decode.sh
#
# Needs scripts/install-xla.sh's plugin. THREADS (default 2) is GOMAXPROCS.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS="${THREADS:-2}" ROUNDS="${ROUNDS:-2}" BATCHES="${BATCHES:-8 16 32}" DTYPES="${DTYPES:-f32}" NEW="${NEW:-128}"
. scripts/bench-inputs.sh
vocab=2048
if [ "${MODEL:-tiny}" = smollm2 ]; then
  [ -f .ci/env ] && source .ci/env
  "$work/mcprl" model import --from "${MCPRL_SMOLLM2_GGUF:?set MCPRL_SMOLLM2_GGUF (bash scripts/test-setup.sh writes it to .ci/env)}" \
    --out "$work/model" >/dev/null
  vocab=49152
else
  bench_tiny "$work/model"
fi
export GOMAXPROCS="$THREADS"
echo "machine: $(nproc) cores; model ${MODEL:-tiny}; $NEW new tokens; load average (1, 5, 15 min) at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$ROUNDS"); do
  for b in $BATCHES; do
    for d in $DTYPES; do
      flag=()
      [ "$d" = bf16 ] && flag=(--bf16)
      before=$(cut -d' ' -f1 /proc/loadavg)
      out=$(python3 -c 'import json, sys; b, n, v = map(int, sys.argv[1:]); print(json.dumps({"prompts": [[(i*31+j*7) % v for j in range(32)] for i in range(b)], "max_new_tokens": n, "temperature": 0}))' "$b" "$NEW" "$vocab" |
        GOMLX_BACKEND= "$work/mcprl" model generate --engine xla --model "$work/model" --repeat 2 "${flag[@]}" 2>"$work/gen.err") ||
        { cat "$work/gen.err" >&2; exit 1; }
      echo "$out" | python3 -c 'import json, sys
r = json.load(sys.stdin); b, d, n, before, after, rnd = sys.argv[1:]
toks, secs = sum(len(c) for c in r["completions"]), r["seconds"]
print(f"round {rnd} batch {b} {d}: {toks / min(secs[1:]):.0f} new tokens/s ({toks} tokens, seconds {[round(s, 2) for s in secs]}), load {before} -> {after}")' \
        "$b" "$d" "$NEW" "$before" "$(cut -d' ' -f1 /proc/loadavg)" "$round"
    done
  done
done
