#!/usr/bin/env bash
# Scores the same 50,000 completions with the user's Python compute_mcp_reward and with
# `mcprl score --reward compute_mcp_reward`, as whole processes, interleaved, and prints the speed-up
# (x-faster-wall: median wall time ratio; x-less-cpu: median CPU time ratio). Needs python3.
set -euo pipefail
cd "$(dirname "$0")/.."
go test ./cmd/mcprl -run '^$' -bench 'ScoreSeedVsPython' -benchtime "${1:-5}x" -count 1
