"""scripts/experiment-results.py tells how each held-out setback ended, from eval's trajectories.jsonl: the table
that shows whether a policy answers at once after a setback, repeats the call that failed, or tries another."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import subprocess
import sys

from conftest import REPO

SCRIPT = REPO / "scripts/experiment-results.py"
spec = importlib.util.spec_from_file_location("experiment_results", SCRIPT)
assert spec is not None and spec.loader is not None
results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(results)

BAD = {"name": "query_database", "arguments": {"sql": "SELECT COUNT(*) FROM loans"}, "is_error": True,
       "result": "SQL error: no such table: loans"}
EMPTY = {"name": "query_database", "arguments": {"sql": "SELECT id FROM t WHERE s = 'x'"}, "result": "id\n--\n(0 rows)"}
LOOK = {"name": "query_database", "arguments": {"sql": "SELECT name FROM sqlite_master"}, "result": "name\n----\nbooks"}
MALFORMED = {"parse_error": "tool call is not valid JSON"}


def traj(*turns: list, answer: str = "", success: bool = False) -> dict:
    return {"category": "library/renamed-column", "success": success, "answer": answer,
            "turns": [{"text": "", "calls": calls} for calls in turns]}


def test_setback_end() -> None:
    cases = [
        ("corrected", traj([BAD], [LOOK], answer="3", success=True)),
        ("answered", traj([BAD], [], answer="0")),
        ("stopped", traj([BAD])),
        ("repeated", traj([BAD], [BAD], answer="0")),
        ("repeated", traj([EMPTY], [MALFORMED], [EMPTY])),  # a malformed call is no retry: the next well-formed one is
        ("changed", traj([BAD], [LOOK], answer="0")),
        ("changed", traj([EMPTY], [BAD], [EMPTY])),  # the first setback's call is the one a retry repeats or not
    ]
    for want, c in cases:
        assert results.setback_end(c) == want, (want, c)


def test_table_counts_each_model(tmp_path: pathlib.Path) -> None:
    runs = {"sft": [traj([BAD], [], answer="0"), traj([LOOK], [], answer="1", success=True)],
            "grpo": [traj([BAD], [BAD]), traj([BAD], [LOOK], answer="2", success=True)]}
    for model, cs in runs.items():
        d = tmp_path / "seed-1" / f"eval-{model}"
        d.mkdir(parents=True)
        (d / "trajectories.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cs))
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "1"], capture_output=True, text=True, check=True).stdout
    rows = [l for l in out.splitlines() if "(seeds pooled)" in l]
    assert rows == ["| 1 (seeds pooled) | SFT | 0 (0.00) | 1 (1.00) | 0 (0.00) | 0 (0.00) | 0 (0.00) |",
                    "| 2 (seeds pooled) | SFT + GRPO | 1 (0.50) | 0 (0.00) | 0 (0.00) | 1 (0.50) | 0 (0.00) |"], out
