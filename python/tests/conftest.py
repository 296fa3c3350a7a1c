"""Shared fixtures of the reference tests: the mcprl binary, built once per run, and offline settings."""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

# No network at test time: every model and tokenizer is made locally or read from the repository.
for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ[_name] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402  (after the environment above)

torch.set_num_threads(2)

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def mcprl(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The mcprl binary built from this checkout."""
    out = tmp_path_factory.mktemp("bin") / "mcprl"
    subprocess.run(["go", "build", "-o", str(out), "./cmd/mcprl"], cwd=REPO, check=True)
    return out


EPS32 = 2.0 ** -23  # float32's machine epsilon
ROUNDING_FACTOR = 3


def rounding_bound(reference_err: float, scale: float) -> float:
    """How far from the float64 answer a float32 result may be: ROUNDING_FACTOR times the reference library's own
    float32 distance from it on the same values, plus one float32 rounding of the largest value (as
    model/llama_test.go's logitDiffs). It scales with float32's error on the computation at hand, so another CPU,
    matmul engine or summation order does not cross it, and a wrong tensor or formula (errors of 1e-2 and more)
    does."""
    return ROUNDING_FACTOR * (reference_err + EPS32 * scale)


def run_mcprl(binary: pathlib.Path, *args: str, stdin: str = "") -> str:
    """Runs mcprl and returns its stdout; a failure shows its stderr."""
    proc = subprocess.run([str(binary), *args], input=stdin, capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        raise AssertionError(f"mcprl {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc.stdout
