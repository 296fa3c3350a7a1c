"""transformers' own bfloat16 answer for the golden checkpoints, for model's bf16 tests (TestBF16GoldenLogits).

gen_golden.py wrote untied/ (float32 weights), tied/ (bfloat16 weights) and golden.json (the inputs, and the
logits and token log-probs in float32 and float64). This script loads each checkpoint as transformers loads a
model for bf16 training (from_pretrained(dtype=torch.bfloat16): weights rounded to bfloat16 to nearest even,
activations in bfloat16, RMSNorm's statistics and the attention softmax in float32 inside) and writes its logits
and token log-probs (log_softmax of the logits widened to float32, as TRL computes them) to bf16_golden.json: how
far they are from golden.json's float64 values is transformers' own bfloat16 error on these weights, which bounds
mcprl's. Run from the repository root after scripts/test-setup.sh:  .venv/bin/python model/testdata/gen_bf16_golden.py
"""

from __future__ import annotations

import json
import pathlib

import torch
from transformers import AutoModelForCausalLM

HERE = pathlib.Path(__file__).resolve().parent


def main() -> None:
    golden = json.loads((HERE / "golden.json").read_text())
    ids = torch.tensor(golden["tokens"])
    mask = torch.tensor(golden["attention_mask"])
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    out: dict[str, dict[str, list]] = {}
    for name in ["untied", "tied"]:
        model = AutoModelForCausalLM.from_pretrained(str(HERE / name), dtype=torch.bfloat16).eval()
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits.float()
        lp = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]
        lp = torch.where(mask[:, 1:].bool() & mask[:, :-1].bool(), lp, torch.zeros_like(lp))
        lp = torch.cat([torch.zeros(lp.shape[0], 1), lp], dim=1)
        out[name] = {"logits": logits.flatten().tolist(), "token_logprobs": lp.tolist()}
    (HERE / "bf16_golden.json").write_text(json.dumps(out))
    print("wrote bf16_golden.json")


if __name__ == "__main__":
    main()
