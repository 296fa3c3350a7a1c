#!/usr/bin/env bash
# Installs the verl environment (python/verl-requirements.lock: verl 0.9.1 and what it imports, every package
# pinned) in which python/tests/test_env_verl.py runs mcprl_env's verl tool through verl's own classes. Its own
# venv, beside python/requirements.lock's (verl 0.9.1 requires transformers<5.11, TRL 1.16 needs 5.23): one per
# machine and lock file in ${XDG_CACHE_HOME:-$HOME/.cache}/mcprl/verl-venv-<hash>, shared by every clone and
# worktree, linked at .verl-venv (scripts/pinned-venv.sh). 5.6 GiB installed (PyPI's torch is its CUDA build),
# 2 to 3 min cold. Idempotent; scripts/test-setup.sh runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/pinned-venv.sh python/verl-requirements.lock verl-venv .verl-venv \
  'import verl.experimental.agent_loop, verl.tools.tool_registry'
