#!/usr/bin/env bash
# Installs the verl environment (python/verl-requirements.lock: verl 0.9.1 and what it imports, every package
# pinned) in which python/tests/test_env_verl.py runs mcprl_env's verl tool through verl's own classes. Its own
# venv, beside python/requirements.lock's (verl 0.9.1 requires transformers<5.11, TRL 1.16 needs 5.23): one per
# machine and lock file in ${XDG_CACHE_HOME:-$HOME/.cache}/mcprl/verl-venv-<hash>, shared by every clone and
# worktree, linked at .verl-venv. 5.6 GiB installed (PyPI's torch is its CUDA build), about 2 min cold.
# Built in place and marked complete at the end; a half-built one (killed mid-install) is removed and rebuilt.
# flock serialises concurrent setups. Idempotent; scripts/test-setup.sh runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

lock=python/verl-requirements.lock
hash=$( (cat "$lock"; python3 -c 'import sys; print(sys.version)') | sha256sum | cut -c1-16)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/mcprl"
venv="$cache/verl-venv-$hash"
mkdir -p "$cache"
(
  flock 9
  if [ ! -e "$venv/.complete" ]; then
    rm -rf "$venv"
    echo "creating the verl environment in $venv (once per machine; a few minutes)"
    start=$(date +%s)
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$lock"
    "$venv/bin/pip" check
    "$venv/bin/python" -c 'import verl.experimental.agent_loop, verl.tools.tool_registry'
    date -u +%FT%TZ > "$venv/.complete"
    echo "verl environment ready in $(( $(date +%s) - start )) s ($(du -sh "$venv" | cut -f1))"
  fi
) 9>"$venv.lock"
if [ -d .verl-venv ] && [ ! -L .verl-venv ]; then rm -rf .verl-venv; fi
ln -sfn "$venv" .verl-venv
