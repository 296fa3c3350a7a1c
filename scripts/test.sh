#!/usr/bin/env bash
# The whole test suite: Go's, then python/tests (transformers, TRL and tokenizers as references) with pytest in
# the pinned environment that scripts/test-setup.sh links at .venv. With MCPRL_TEST_POSTGRES unset, PostgreSQL
# tests skip locally and fail under CI=true; without .venv the Python tests skip locally and fail under CI=true.
#
# The suite passes on any x86-64 CPU and both matmul engines (numeric bounds are derived from float64 references
# and from the sums' rounding, never bare constants: docs/model.md, "Every CPU and engine"). To run it as another
# CPU would, on this one:
#   GODEBUG=cpu.avx2=off,cpu.avx512f=off,cpu.fma=off MCPRL_OPENBLAS=off bash scripts/test.sh  # no AVX2: scalar Go kernels, Go matmul
#   GODEBUG=cpu.avx512f=off OPENBLAS_CORETYPE=Haswell bash scripts/test.sh                    # AVX2 without AVX-512
#   MCPRL_OPENBLAS=off bash scripts/test.sh                                                    # the Go matmul engine
# (XLA compiles for this CPU whatever GODEBUG says: add MCPRL_TEST_ENGINES=simplego to leave its tests out.)
set -euo pipefail
cd "$(dirname "$0")/.."
go vet ./...
go test -count=1 -timeout 25m ./...

if [ ! -x .venv/bin/python ]; then
  if [ "${CI:-}" = true ]; then
    echo "python/tests: no .venv; run scripts/test-setup.sh first" >&2
    exit 1
  fi
  echo "python/tests skipped: no .venv (run scripts/test-setup.sh)"
  exit 0
fi
# No network at test time: every model and tokenizer the tests load is made locally or copied into testdata.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
rc=0
.venv/bin/python -m pytest -q python/tests || rc=$?
# pytest exits 5 when it collected no test: that is a failure here, the folder is never meant to be empty.
if [ "$rc" -eq 5 ]; then
  echo "python/tests: pytest collected no test" >&2
fi
exit "$rc"
