#!/usr/bin/env bash
# Installs OpenBLAS (libopenblas0), which mcprl loads at run time for the model's float32 matmuls.
# Optional: without it the matmuls run on mcprl's Go kernel, about 8x slower (10 steps of
# examples/customers/quick.yaml: 50 s with OpenBLAS, 401 s without, back to back on one shared
# 2-core machine). Debian/Ubuntu, as root. Says plainly what it did; exits 0 either way.
set -uo pipefail

have() { ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so'; }

if have; then
  echo "OpenBLAS: installed ($(ldconfig -p | grep -m1 'libopenblas\.so' | sed 's/.*=> //'))"
  exit 0
fi
why=""
if ! command -v apt-get >/dev/null 2>&1; then
  why="no apt-get on this system (install OpenBLAS with your package manager)"
elif [ "$(id -u)" != 0 ]; then
  why="not root (run: sudo apt-get install libopenblas0)"
else
  # A fresh container has no package lists: apt-get install would find nothing.
  if [ -z "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v -e '^lock$' -e '^partial$')" ]; then
    echo "OpenBLAS: apt has no package lists; running apt-get update"
    apt-get update -qq || why="apt-get update failed"
  fi
  if [ -z "$why" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libopenblas0 >/dev/null || why="apt-get install libopenblas0 failed"
  fi
fi
if [ -z "$why" ] && have; then
  echo "OpenBLAS: installed now"
  exit 0
fi
echo "OpenBLAS: NOT installed: ${why:-the library is still not found}."
echo "mcprl still runs: its matmuls use the Go kernel instead, about 8x slower (mcprl prints which engine it uses when it starts)."
exit 0
