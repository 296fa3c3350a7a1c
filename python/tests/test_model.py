"""Model parity with transformers' Qwen2ForCausalLM.

Checkpoints move both ways (mcprl model init -> AutoModelForCausalLM, save_pretrained -> mcprl), logits agree
within 1e-5 in float32 on random inputs with left and right padding, and 64 greedy tokens are identical, for tied
and untied embeddings, bfloat16 and sharded checkpoints, and the real Qwen2.5-0.5B layout (random weights, two
layers). Checkpoints with tensors or dtypes mcprl does not support are refused with an error naming the tensor.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

from conftest import REPO, rounding_bound, run_mcprl

LOGITS_TOL = 1e-5  # printed when crossed; the bound is rounding_bound's


TINY: dict[str, Any] = dict(
    architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=64, intermediate_size=96,
    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=160, rope_theta=10000.0,
    rms_norm_eps=1e-6, max_position_embeddings=256, initializer_range=0.08, hidden_act="silu",
    bos_token_id=1, eos_token_id=2, use_sliding_window=False, attention_dropout=0.0, use_cache=True,
)

# Qwen2.5-0.5B's config.json, with two of its 24 layers.
QWEN25_05B: dict[str, Any] = dict(
    architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=896, intermediate_size=4864,
    num_hidden_layers=2, num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
    rope_theta=1000000.0, rms_norm_eps=1e-6, max_position_embeddings=32768, max_window_layers=21,
    initializer_range=0.02, hidden_act="silu", bos_token_id=151643, eos_token_id=151643,
    sliding_window=32768, use_sliding_window=False, attention_dropout=0.0, use_cache=True,
    tie_word_embeddings=True, torch_dtype="bfloat16",
)


def _inputs(vocab: int, seed: int, batch: int = 3, length: int = 24) -> tuple[torch.Tensor, torch.Tensor]:
    """Random tokens with a full row, a left-padded row and a right-padded row (then alternating)."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(3, vocab, (batch, length), generator=g)
    mask = torch.ones(batch, length, dtype=torch.long)
    for b in range(1, batch):
        pad = 3 + 2 * b
        if b % 2 == 1:
            mask[b, :pad] = 0
        else:
            mask[b, length - pad:] = 0
    tokens = torch.where(mask == 1, tokens, torch.zeros_like(tokens))
    return tokens, mask


def _hf_logits(model: Qwen2ForCausalLM, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # Positions count real tokens, as generate() computes them for left-padded rows.
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        return model(input_ids=tokens, attention_mask=mask, position_ids=positions).logits


def _mcprl_forward(mcprl: pathlib.Path, directory: pathlib.Path, tokens: torch.Tensor, mask: torch.Tensor,
                   out: pathlib.Path) -> dict[str, torch.Tensor]:
    run_mcprl(mcprl, "model", "forward", "--model", str(directory), "--out", str(out),
              stdin=json.dumps({"tokens": tokens.tolist(), "attention_mask": mask.tolist()}))
    return load_file(str(out))


def _assert_logits_match(mcprl: pathlib.Path, directory: pathlib.Path, model: Qwen2ForCausalLM,
                         tmp_path: pathlib.Path, seed: int, tol: float = LOGITS_TOL) -> None:
    """mcprl's float32 logits and token log-probs are no further from transformers' float64 answer (the exact one
    for these weights) than ROUNDING_FACTOR times transformers' own float32 distance from it plus one rounding of the
    largest value (rounding_bound): a bound that scales with float32's error on this model, so that another CPU or
    summation order does not cross it. tol is the distance from transformers' float32 logits, printed only."""
    tokens, mask = _inputs(model.config.vocab_size, seed)
    want = _hf_logits(model, tokens, mask)
    exact = _hf_logits(model.double(), tokens, mask)
    model.float()
    got = _mcprl_forward(mcprl, directory, tokens, mask, tmp_path / "forward.safetensors")
    assert tuple(got["logits"].shape) == tuple(want.shape)
    real = mask.bool()
    assert want[real].abs().max() > 1.0, "logits too flat for a sharp comparison"
    diff = (got["logits"][real] - want[real]).abs().max().item()
    torch_err = (want[real] - exact[real]).abs().max().item()
    our_err = (got["logits"][real] - exact[real].float()).abs().max().item()
    print(f"{directory.name}: max |logit| {want[real].abs().max().item():.3g}; max |mcprl - transformers| {diff:.3g}; "
          f"against float64: transformers {torch_err:.3g}, mcprl {our_err:.3g}")
    if diff > tol:
        print(f"note: {diff:.3g} from transformers' float32 logits, past {tol:.3g}; the float64 bound decides")
    bound = rounding_bound(torch_err, exact[real].abs().max().item())
    assert our_err <= bound, f"mcprl {our_err:.3g} from float64, bound {bound:.3g} (transformers {torch_err:.3g})"
    # Per-token log-probs (what GRPO's ratios use) from transformers' logits, float32 and float64.
    defined = real[:, 1:] & real[:, :-1]

    def token_lp(logits: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(logits, -1)[:, :-1].gather(-1, tokens[:, 1:, None])[..., 0][defined]

    lp, lp64 = token_lp(want), token_lp(exact)
    ours_lp = got["token_logprobs"][:, 1:][defined].double()
    lp_torch_err = (lp.double() - lp64).abs().max().item()
    lp_err = (ours_lp - lp64).abs().max().item()
    lp_bound = rounding_bound(lp_torch_err, lp64.abs().max().item())
    print(f"token log-probs against float64: transformers {lp_torch_err:.3g}, mcprl {lp_err:.3g} (bound {lp_bound:.3g})")
    assert lp_err <= lp_bound, f"token log-probs {lp_err:.3g} from float64, bound {lp_bound:.3g}"


def _assert_greedy_match(mcprl: pathlib.Path, directory: pathlib.Path, model: Qwen2ForCausalLM, seed: int,
                         batch: int = 4, new_tokens: int = 64) -> None:
    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(3, model.config.vocab_size, (5 + 3 * i,), generator=g).tolist() for i in range(batch)]
    eos = model.config.eos_token_id
    got = json.loads(run_mcprl(mcprl, "model", "generate", "--model", str(directory), stdin=json.dumps(
        {"prompts": prompts, "max_new_tokens": new_tokens, "temperature": 0, "stop": [eos]})))["completions"]
    longest = max(len(p) for p in prompts)
    ids = torch.zeros(batch, longest, dtype=torch.long)
    mask = torch.zeros(batch, longest, dtype=torch.long)
    for i, p in enumerate(prompts):  # left padding, as for decoder-only generation
        ids[i, longest - len(p):] = torch.tensor(p)
        mask[i, longest - len(p):] = 1
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=new_tokens,
                             eos_token_id=eos, pad_token_id=0)
    for i in range(batch):
        want = out[i, longest:].tolist()
        if eos in want:
            want = want[: want.index(eos) + 1]
        assert got[i] == want, f"prompt {i}: greedy tokens differ"
    assert sum(len(c) for c in got) >= batch * new_tokens // 2, "most sequences stopped early; too short a check"


def _mcprl_init(mcprl: pathlib.Path, tmp_path: pathlib.Path, config: dict[str, Any], dtype: str,
                name: str) -> pathlib.Path:
    cfg_path = tmp_path / f"{name}.json"
    cfg_path.write_text(json.dumps(config))
    out = tmp_path / name
    run_mcprl(mcprl, "model", "init", "--config", str(cfg_path), "--out", str(out), "--seed", "7", "--dtype", dtype)
    return out


@pytest.mark.parametrize("tied,dtype,theta", [(True, "float32", 1e6), (False, "float32", 1e4), (False, "bfloat16", 1e4)])
def test_mcprl_init_loads_in_transformers(mcprl: pathlib.Path, tmp_path: pathlib.Path, tied: bool, dtype: str,
                                          theta: float) -> None:
    config = dict(TINY, tie_word_embeddings=tied, rope_theta=theta)
    directory = _mcprl_init(mcprl, tmp_path, config, dtype, "init")
    model = AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch.float32).eval()
    assert isinstance(model, Qwen2ForCausalLM)
    assert model.config.rope_parameters["rope_theta"] == theta
    # Every tensor mcprl wrote is one transformers uses: none missing, none left at a fresh initialisation.
    stored = load_file(str(directory / "model.safetensors"))
    params = dict(model.named_parameters())
    for name, value in stored.items():
        assert torch.equal(params[name].detach(), value.float()), name
    assert ("lm_head.weight" in stored) == (not tied)
    _assert_logits_match(mcprl, directory, model, tmp_path, seed=1)
    _assert_greedy_match(mcprl, directory, model, seed=2)


def _random_hf(config: dict[str, Any], seed: int, scale: float) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(Qwen2Config(**config)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(scale * torch.randn_like(p))  # biases too: nonzero, so that they are checked
    return model


@pytest.mark.parametrize("tied,dtype,shard", [(False, torch.float32, "60KB"), (True, torch.bfloat16, None),
                                              (False, torch.bfloat16, "100KB")])
def test_transformers_checkpoint_loads_in_mcprl(mcprl: pathlib.Path, tmp_path: pathlib.Path, tied: bool,
                                                dtype: torch.dtype, shard: str | None) -> None:
    model = _random_hf(dict(TINY, tie_word_embeddings=tied), seed=3, scale=0.08).to(dtype)
    directory = tmp_path / "hf"
    model.save_pretrained(str(directory), **({"max_shard_size": shard} if shard else {}))
    assert (directory / "model.safetensors.index.json").exists() == (shard is not None)
    # Compare against the stored (possibly bf16-rounded) weights, loaded back in float32 (a bf16 model cast
    # with .float() would keep its bf16-rounded rotary frequencies).
    model = AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch.float32).eval()
    info = run_mcprl(mcprl, "model", "info", str(directory))
    assert f"tied {str(tied).lower()}" in info
    _assert_logits_match(mcprl, directory, model, tmp_path, seed=4)
    _assert_greedy_match(mcprl, directory, model, seed=5)


def test_qwen25_05b_layout(mcprl: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """The real Qwen2.5-0.5B layout (151,936 ids, 896 hidden, 14/2 heads, tied, bf16), two layers.

    With 896-wide dot products, two float32 implementations differ by more than 1e-5 (transformers' own float32
    logits are ~9e-6 from its float64 ones here); mcprl must be about as close to the float64 answer as
    transformers' float32 is (conftest.rounding_bound).
    """
    model = _random_hf(QWEN25_05B, seed=6, scale=0.04).to(torch.bfloat16)
    directory = tmp_path / "qwen2.5-0.5b-2l"
    model.save_pretrained(str(directory))
    model = AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch.float32).eval()
    _assert_logits_match(mcprl, directory, model, tmp_path, seed=7, tol=2e-5)
    _assert_greedy_match(mcprl, directory, model, seed=8, batch=2)


def _expect_refused(mcprl: pathlib.Path, directory: pathlib.Path, *needles: str) -> None:
    proc = subprocess.run([str(mcprl), "model", "info", str(directory)], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode != 0, f"mcprl loaded {directory}"
    for needle in needles:
        assert needle in proc.stderr, f"error does not name {needle!r}:\n{proc.stderr}"


def test_unsupported_checkpoints_are_refused(mcprl: pathlib.Path, tmp_path: pathlib.Path) -> None:
    model = _random_hf(dict(TINY, tie_word_embeddings=False), seed=9, scale=0.08)
    # float64 weights, as save_pretrained writes them from a float64 model.
    f64 = tmp_path / "f64"
    model.double().save_pretrained(str(f64))
    _expect_refused(mcprl, f64, "model.embed_tokens.weight", "F64")
    # A tensor Qwen2 does not have (o_proj has no bias in Qwen2).
    extra = tmp_path / "extra"
    model.float().save_pretrained(str(extra))
    weights = load_file(str(extra / "model.safetensors"))
    weights["model.layers.1.self_attn.o_proj.bias"] = torch.ones(TINY["hidden_size"])
    save_file(weights, str(extra / "model.safetensors"), metadata={"format": "pt"})
    _expect_refused(mcprl, extra, "model.layers.1.self_attn.o_proj.bias")
    # Integer (quantized) storage of a weight.
    int8 = tmp_path / "int8"
    model.save_pretrained(str(int8))
    weights = load_file(str(int8 / "model.safetensors"))
    weights["model.layers.0.mlp.up_proj.weight"] = weights["model.layers.0.mlp.up_proj.weight"].to(torch.int8)
    save_file(weights, str(int8 / "model.safetensors"), metadata={"format": "pt"})
    _expect_refused(mcprl, int8, "model.layers.0.mlp.up_proj.weight", "I8")
