"""python/bench/bench_trl.py, TRL's half of scripts/bench-vs-trl.sh and scripts/bench-smollm2-step.sh (TRL=1), times
the step it says it times: with --lora-r, TRL's PEFT path trains exactly the adapter mcprl's BenchmarkGRPOStep
trains (LoRA of rank r on q_proj and v_proj: r x (in + out) weights per projection and layer), and
--gradient-checkpointing is the setting the model ran with, not only the one asked for."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from transformers import AutoModelForCausalLM

from conftest import REPO, run_mcprl


def bench(model: pathlib.Path, *args: str) -> dict:
    proc = subprocess.run([sys.executable, str(REPO / "python/bench/bench_trl.py"), str(model), "1", *args],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_lora_step_trains_the_adapter(mcprl: pathlib.Path, tmp_path: pathlib.Path) -> None:
    model = tmp_path / "tiny"
    run_mcprl(mcprl, "model", "init", "--tokenizer", "tokenizer/small/qwen2.5-2048", "--out", str(model), "--seed", "1")
    c = json.loads((model / "config.json").read_text())
    head = c["hidden_size"] // c["num_attention_heads"]
    d, q, kv, r = c["hidden_size"], c["num_attention_heads"] * head, c["num_key_value_heads"] * head, 4
    want = c["num_hidden_layers"] * (r * (d + q) + r * (d + kv))

    for checkpointing in (False, True):
        flags = ["--gradient-checkpointing"] if checkpointing else []
        got = bench(model, "--lora-r", str(r), "--prompt", "16", "--completion", "16", "--steps", "1", "--no-sampling",
                    *flags)
        assert got["trainable_parameters"] == want
        assert got["gradient_checkpointing"] is checkpointing
        assert len(got["step_seconds"]) == 2 and got["sample_seconds"] == []
        assert got["mixed_precision"] == "no" and got["peak_rss_gib"] > 0

    full = bench(model, "fp32", "--prompt", "16", "--completion", "16", "--steps", "1")
    every = sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(model).parameters())
    assert full["trainable_parameters"] == every
    assert len(full["sample_seconds"]) == 3
