"""mcprl train's TensorBoard event files, read by TensorBoard's own EventAccumulator.

With report_to: tensorboard, a run writes transformers' tags ("train/" + each metrics.jsonl key) at each
logging step under output_dir/runs/; TensorBoard must read back exactly metrics.jsonl's values (as float32,
the precision of a Summary's simple_value).
"""

from __future__ import annotations

import json
import math
import pathlib

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from conftest import REPO, run_mcprl


def test_train_tensorboard_events(mcprl: pathlib.Path, tmp_path: pathlib.Path) -> None:
    config = tmp_path / "quick.yaml"
    config.write_text((REPO / "examples/customers/quick.yaml").read_text() + "\nreport_to: tensorboard\n")
    out = tmp_path / "run"
    run_mcprl(mcprl, "train", "--config", str(config), "--output-dir", str(out), "--max-steps", "3")

    logs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logs] == [1, 2, 3]
    event_dirs = sorted({p.parent for p in (out / "runs").rglob("events.out.tfevents.*")})
    assert len(event_dirs) == 1, event_dirs
    acc = EventAccumulator(str(event_dirs[0]), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    for rec in logs:
        for key, value in rec.items():
            if key == "step":
                continue
            tag = "train/" + key
            events = {e.step: e.value for e in acc.Scalars(tag)} if tag in tags else {}
            if value is None:
                # transformers' TensorBoardCallback writes no scalar for a None (a metric with nothing to
                # measure it on): neither does mcprl.
                assert rec["step"] not in events, f"{tag} step {rec['step']}: {events[rec['step']]}, metrics.jsonl null"
                continue
            assert rec["step"] in events, f"{tag} step {rec['step']} missing from the event file (tags {sorted(tags)})"
            got = events[rec["step"]]
            assert got == float(np.float32(value)), f"{tag} step {rec['step']}: {got}, metrics.jsonl {value}"
            assert not math.isnan(got)
