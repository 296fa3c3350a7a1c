"""Runs `mcprl env serve` for the tests of the mcprl_env package (python/mcprl_env, imported from the checkout)."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))  # the package as it is in this checkout

FIXTURES = REPO / "examples" / "fixtures"
TASKS = REPO / "examples" / "customers" / "tasks.jsonl"


@contextmanager
def env_serve(binary: pathlib.Path, *extra: str) -> Iterator[str]:
    """Starts `mcprl env serve` on a free loopback port; yields its base URL; stops it with SIGTERM."""
    proc = subprocess.Popen(
        [str(binary), "env", "serve", "--fixtures", str(FIXTURES), "--tasks", str(TASKS), "--listen", "127.0.0.1:0", *extra],
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stderr is not None
    url = None
    for line in proc.stderr:
        m = re.search(r"environment server at (http://[^/ ]+)/", line)
        if m:
            url = m.group(1)
            break
    if url is None:
        proc.kill()
        raise AssertionError(f"mcprl env serve did not start: {proc.stderr.read()}")
    try:
        yield url
    finally:
        proc.terminate()
        rest = proc.stderr.read()
        code = proc.wait(timeout=60)
        assert code == 0, f"mcprl env serve exited {code}: {rest}"


def stats(url: str) -> dict[str, Any]:
    """The server's counters (GET /stats)."""
    with urllib.request.urlopen(url + "/stats", timeout=30) as resp:
        return json.load(resp)


def tasks() -> list[dict[str, Any]]:
    return [json.loads(line) for line in TASKS.read_text().splitlines() if line.strip()]
