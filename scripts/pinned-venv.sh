#!/usr/bin/env bash
# Makes a Python virtual environment from a lock file of exact versions, once per machine and lock file, in
# ${XDG_CACHE_HOME:-$HOME/.cache}/mcprl/NAME-<hash of the lock file and Python's version>, shared by every clone and
# worktree, and links LINK in the checkout to it. Built in place and marked complete at the end; a half-built one
# (killed mid-install) is removed and rebuilt. flock serialises concurrent setups. Idempotent.
#   scripts/pinned-venv.sh LOCK NAME LINK [PYTHON]   (PYTHON: code that must run in it before it counts as complete)
set -euo pipefail
cd "$(dirname "$0")/.."
lock=$1 name=$2 link=$3 check=${4:-}

hash=$( (cat "$lock"; python3 -c 'import sys; print(sys.version)') | sha256sum | cut -c1-16)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/mcprl"
venv="$cache/$name-$hash"
mkdir -p "$cache"
(
  flock 9
  if [ ! -e "$venv/.complete" ]; then
    rm -rf "$venv"
    echo "creating $venv from $lock (once per machine; a few minutes)"
    start=$(date +%s)
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$lock"
    "$venv/bin/pip" check
    if [ -n "$check" ]; then "$venv/bin/python" -c "$check"; fi
    date -u +%FT%TZ > "$venv/.complete"
    echo "$venv ready in $(( $(date +%s) - start )) s ($(du -sh "$venv" | cut -f1))"
  fi
) 9>"$venv.lock"
if [ -d "$link" ] && [ ! -L "$link" ]; then rm -rf "$link"; fi
ln -sfn "$venv" "$link"
