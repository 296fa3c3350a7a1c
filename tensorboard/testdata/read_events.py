"""Reads a TensorBoard log directory with TensorBoard's own EventAccumulator and prints its scalars.

Output: one JSON object {tag: [[step, value], ...]} on stdout. Used by writer_test.go to check that the
event files mcprl writes are the ones TensorBoard reads.
"""

import json
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main(logdir: str) -> None:
    acc = EventAccumulator(logdir, size_guidance={"scalars": 0})
    acc.Reload()
    out: dict[str, list[list[float]]] = {}
    for tag in acc.Tags()["scalars"]:
        out[tag] = [[e.step, e.value] for e in acc.Scalars(tag)]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
