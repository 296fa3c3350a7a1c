"""`pip install ./python` from the checkout (built as a wheel, offline): a fresh virtual environment gets the mcprl_env package (its modules,
py.typed and README), its pinned dependency in the metadata, and a working client of `mcprl env serve`."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys

from conftest import REPO
from env_server import env_serve

import websockets


def test_pip_install_from_checkout(mcprl: pathlib.Path, tmp_path: pathlib.Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    # Offline: pip builds the wheel with the test environment's setuptools (no index, no build isolation), and the
    # fresh environment installs it; its one dependency is added below.
    # (From a copy: setuptools writes build/ and egg-info next to pyproject.toml.)
    src = tmp_path / "src"
    shutil.copytree(REPO / "python", src, ignore=shutil.ignore_patterns("tests", "bench", "build", "*.egg-info", "__pycache__"))
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-index", "--no-deps", "--no-build-isolation", "-w", str(dist), str(src)],
        check=True,
        cwd=tmp_path,
    )
    wheels = list(dist.glob("mcprl_env-*.whl"))
    assert len(wheels) == 1, wheels
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(wheels[0])], check=True, cwd=tmp_path)
    show = subprocess.run([str(py), "-m", "pip", "show", "-f", "mcprl-env"], check=True, capture_output=True, text=True).stdout
    assert "Requires: websockets" in show
    installed = {line.strip() for line in show.splitlines() if line.startswith("  mcprl_env/")}
    source = REPO / "python" / "mcprl_env"
    want = {f"mcprl_env/{p.name}" for p in source.iterdir() if p.suffix == ".py" or p.name in ("py.typed", "README.md")}
    assert want <= installed, f"missing from the install: {sorted(want - installed)}"
    # The pinned websockets of the lock (the package's one dependency), as pip would have installed it.
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "lock-websockets.pth").write_text(str(pathlib.Path(websockets.__file__).parents[1]) + "\n")

    script = """
import json, sys, mcprl_env
env = mcprl_env.Environment()
env.reset(task_id="customers-inactive-001")
out = env.query_database(sql="SELECT COUNT(*) FROM customers WHERE status = 'inactive'")
call = '<tool_call>{"name": "query_database", "arguments": {"sql": "SELECT COUNT(*) FROM customers WHERE status = \\'inactive\\'"}}</tool_call>'
reward = mcprl_env.compute_mcp_reward([call], environments=[env])
env._close()
print(json.dumps({"file": mcprl_env.__file__, "out": out, "reward": reward}))
"""
    with env_serve(mcprl) as url:
        proc = subprocess.run(
            [str(py), "-c", script], capture_output=True, text=True, cwd=tmp_path, env={"MCPRL_ENV_URL": url, "PATH": "/usr/bin:/bin"}
        )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["file"].startswith(str(site)), got["file"]  # the installed copy, not the checkout's
    assert got["out"].splitlines()[2].strip() == "7"
    assert got["reward"] == [1.0]
