"""Golden data for model's Go tests, made by transformers itself (python/requirements.lock's versions).

Tiny random Qwen2 checkpoints written by Qwen2ForCausalLM.save_pretrained and the logits transformers computes for
them, so that `go test ./model` checks mcprl against transformers without Python at test time. Run from the
repository root after scripts/test-setup.sh:  .venv/bin/python model/testdata/gen_golden.py

Writes (beside this file):
  untied/      float32, sharded in two (model.safetensors.index.json)
  tied/        bfloat16, one file; logits computed from the bf16 weights loaded back in float32
  golden.json  inputs (tokens, attention_mask: a full, a left-padded and a right-padded row) and, per model,
               logits [B, T, V] and token_logprobs [B, T] (log p(tokens[t] | tokens[<t]), 0 where undefined),
               and logits64 and token_logprobs64, the same computed in float64 from the same weights: how far
               transformers' own float32 is from them is the rounding the Go tests allow for
  unsupported/ checkpoints transformers writes that mcprl must refuse, naming the tensor or key:
               f64 (float64 weights), extra (a tensor Qwen2 lacks), int8 (integer storage), yarn (scaled rope)
Positions are cumsum(attention_mask) - 1 (clamped at 0), as transformers' generate() computes position_ids.
"""

from __future__ import annotations

import json
import pathlib
import shutil
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

HERE = pathlib.Path(__file__).resolve().parent
torch.manual_seed(1234)

BASE: dict[str, Any] = dict(
    architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=32, intermediate_size=48,
    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=96, rope_theta=10000.0,
    rms_norm_eps=1e-6, max_position_embeddings=128, initializer_range=0.02, hidden_act="silu",
    bos_token_id=1, eos_token_id=2, use_sliding_window=False, attention_dropout=0.0, use_cache=True,
)


def random_model(cfg: dict[str, Any]) -> Qwen2ForCausalLM:
    """Qwen2ForCausalLM with weights larger than HF's 0.02 init, so that logits are far from uniform."""
    model = Qwen2ForCausalLM(Qwen2Config(**cfg)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.1 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif "embed_tokens" in name or "lm_head" in name:
                p.copy_(0.5 * torch.randn_like(p))
            else:
                p.copy_(0.2 * torch.randn_like(p))
    return model


def fresh(path: pathlib.Path) -> pathlib.Path:
    shutil.rmtree(path, ignore_errors=True)
    return path


def main() -> None:
    ids = torch.randint(3, BASE["vocab_size"], (3, 8))
    mask = torch.tensor([[1] * 8, [0, 0, 0] + [1] * 5, [1] * 6 + [0, 0]])
    ids = torch.where(mask.bool(), ids, torch.zeros_like(ids))  # pad id 0
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    golden: dict[str, Any] = {"tokens": ids.tolist(), "attention_mask": mask.tolist(), "models": {}}

    for name, tied, dtype, shard in [("untied", False, torch.float32, "60KB"), ("tied", True, torch.bfloat16, None)]:
        directory = fresh(HERE / name)
        random_model(dict(BASE, tie_word_embeddings=tied)).to(dtype).save_pretrained(
            str(directory), **({"max_shard_size": shard} if shard else {}))
        model = AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch.float32).eval()
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
            logits64 = model.double()(input_ids=ids, attention_mask=mask, position_ids=positions).logits

        def token_logprobs(logits: torch.Tensor) -> torch.Tensor:
            lp = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]
            lp = torch.where(mask[:, 1:].bool() & mask[:, :-1].bool(), lp, torch.zeros_like(lp))
            return torch.cat([torch.zeros(lp.shape[0], 1, dtype=lp.dtype), lp], dim=1)

        golden["models"][name] = {"logits": logits.flatten().tolist(), "logits_shape": list(logits.shape),
                                  "token_logprobs": token_logprobs(logits).tolist(),
                                  "logits64": logits64.flatten().tolist(),
                                  "token_logprobs64": token_logprobs(logits64).tolist()}
    (HERE / "golden.json").write_text(json.dumps(golden))

    bad = fresh(HERE / "unsupported")
    model = random_model(dict(BASE, tie_word_embeddings=False))
    model.double().save_pretrained(str(bad / "f64"))
    model.float()
    for case, edit in [
        ("extra", lambda w: w.__setitem__("model.layers.1.self_attn.o_proj.bias", torch.ones(BASE["hidden_size"]))),
        ("int8", lambda w: w.__setitem__("model.layers.0.mlp.up_proj.weight",
                                         w["model.layers.0.mlp.up_proj.weight"].to(torch.int8))),
    ]:
        model.save_pretrained(str(bad / case))
        weights = load_file(str(bad / case / "model.safetensors"))
        edit(weights)
        save_file(weights, str(bad / case / "model.safetensors"), metadata={"format": "pt"})
    Qwen2ForCausalLM(Qwen2Config(**dict(BASE, hidden_size=8, intermediate_size=8, vocab_size=16, rope_parameters={
        "rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 32}))
    ).save_pretrained(str(bad / "yarn"))
    print("wrote untied/, tied/, golden.json, unsupported/")


if __name__ == "__main__":
    main()
