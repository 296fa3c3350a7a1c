#!/usr/bin/env bash
# The whole test suite. With MCPRL_TEST_POSTGRES unset, PostgreSQL tests skip
# locally and fail under CI=true; scripts/test-setup.sh sets everything up.
set -euo pipefail
cd "$(dirname "$0")/.."
go vet ./...
go test -count=1 -timeout 25m ./...
