#!/usr/bin/python3
"""Golden data for model's Go tests: tiny random Qwen2 checkpoints and their logits.

An independent reference of Hugging Face's Qwen2ForCausalLM forward pass, written from the formulas of
transformers/models/qwen2/modeling_qwen2.py (Qwen2RMSNorm, Qwen2RotaryEmbedding + apply_rotary_pos_emb,
repeat_kv + eager_attention_forward with q/k/v biases and no o_proj bias, Qwen2MLP) in PyTorch (torch 1.13, no
transformers here). Run once from this directory: /usr/bin/python3 gen_golden.py

Writes:
  untied/  config.json, model-00001-of-00002.safetensors, model-00002-of-00002.safetensors,
           model.safetensors.index.json (float32, sharded)
  tied/    config.json, model.safetensors (bfloat16; logits computed from the bf16-rounded weights)
  golden.json  inputs (tokens, attention_mask: full, left-padded and right-padded rows) and, per model,
               logits [B, T, V] and token_logprobs [B, T] (log p(tokens[t] | tokens[<t]), 0 where undefined)
Positions are cumsum(attention_mask) - 1 (clamped at 0), as transformers' generate() computes position_ids.
"""
import json
import math
import struct

import torch

torch.manual_seed(1234)

BASE = dict(
    architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=32, intermediate_size=48,
    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=96, rope_theta=10000.0,
    rms_norm_eps=1e-6, max_position_embeddings=128, initializer_range=0.02, hidden_act="silu",
    bos_token_id=1, eos_token_id=2, use_sliding_window=False, attention_dropout=0.0, use_cache=True,
)


def make_weights(cfg):
    d, v, i = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    hd = d // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"] * hd
    # Larger than HF's 0.02 init so logits are far from uniform and the comparison is sharp.
    w = {"model.embed_tokens.weight": torch.randn(v, d) * 0.5}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        w[p + "self_attn.q_proj.weight"] = torch.randn(d, d) * 0.2
        w[p + "self_attn.q_proj.bias"] = torch.randn(d) * 0.1
        w[p + "self_attn.k_proj.weight"] = torch.randn(kv, d) * 0.2
        w[p + "self_attn.k_proj.bias"] = torch.randn(kv) * 0.1
        w[p + "self_attn.v_proj.weight"] = torch.randn(kv, d) * 0.2
        w[p + "self_attn.v_proj.bias"] = torch.randn(kv) * 0.1
        w[p + "self_attn.o_proj.weight"] = torch.randn(d, d) * 0.2
        w[p + "mlp.gate_proj.weight"] = torch.randn(i, d) * 0.2
        w[p + "mlp.up_proj.weight"] = torch.randn(i, d) * 0.2
        w[p + "mlp.down_proj.weight"] = torch.randn(d, i) * 0.2
        w[p + "input_layernorm.weight"] = 1 + torch.randn(d) * 0.1
        w[p + "post_attention_layernorm.weight"] = 1 + torch.randn(d) * 0.1
    w["model.norm.weight"] = 1 + torch.randn(d) * 0.1
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = torch.randn(v, d) * 0.5
    return w


def rms_norm(x, weight, eps):
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def forward(cfg, w, input_ids, attention_mask):
    B, T = input_ids.shape
    d = cfg["hidden_size"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = d // nh
    eps = cfg["rms_norm_eps"]
    position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    # Qwen2RotaryEmbedding (default rope).
    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    freqs = (inv_freq[None, :, None].expand(B, -1, 1) @ position_ids[:, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]  # [B, 1, T, hd]
    # 4D mask: causal and padding, added to scores as finfo.min where masked.
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    allowed = causal[None, None] & attention_mask.bool()[:, None, None, :]
    mask = torch.zeros(B, 1, T, T).masked_fill(~allowed, torch.finfo(torch.float32).min)

    h = w["model.embed_tokens.weight"][input_ids]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        lin = lambda x, n, bias=True: torch.nn.functional.linear(x, w[p + n + ".weight"], w.get(p + n + ".bias") if bias else None)
        x = rms_norm(h, w[p + "input_layernorm.weight"], eps)
        q = lin(x, "self_attn.q_proj").view(B, T, nh, hd).transpose(1, 2)
        k = lin(x, "self_attn.k_proj").view(B, T, nkv, hd).transpose(1, 2)
        v = lin(x, "self_attn.v_proj").view(B, T, nkv, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = nh // nkv
        k = k[:, :, None].expand(B, nkv, rep, T, hd).reshape(B, nh, T, hd)  # repeat_kv
        v = v[:, :, None].expand(B, nkv, rep, T, hd).reshape(B, nh, T, hd)
        scores = q @ k.transpose(2, 3) * (hd ** -0.5) + mask
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32)
        attn = (probs @ v).transpose(1, 2).reshape(B, T, d)
        h = h + lin(attn, "self_attn.o_proj", bias=False)
        x = rms_norm(h, w[p + "post_attention_layernorm.weight"], eps)
        gate, up = lin(x, "mlp.gate_proj", bias=False), lin(x, "mlp.up_proj", bias=False)
        h = h + lin(torch.nn.functional.silu(gate) * up, "mlp.down_proj", bias=False)
    h = rms_norm(h, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    return h @ head.T


def token_logprobs(logits, ids, attention_mask):
    lp = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, ids[:, 1:, None])[..., 0]
    ok = attention_mask[:, 1:].bool() & attention_mask[:, :-1].bool()
    lp = torch.where(ok, lp, torch.zeros_like(lp))
    return torch.cat([torch.zeros(lp.shape[0], 1), lp], dim=1)


def bf16_round(t):
    return t.to(torch.bfloat16).to(torch.float32)


def write_safetensors(path, tensors, dtype):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        if dtype == "BF16":
            raw = t.to(torch.bfloat16).view(torch.int16).numpy().tobytes()
        else:
            raw = t.to(torch.float32).numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hb = json.dumps(header).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for b in blobs:
            f.write(b)


def save(dirname, cfg, w, dtype, shards):
    import os
    os.makedirs(dirname, exist_ok=True)
    with open(f"{dirname}/config.json", "w") as f:
        json.dump(cfg, f, indent=2)
    if shards == 1:
        write_safetensors(f"{dirname}/model.safetensors", w, dtype)
        return
    names = sorted(w)
    per = math.ceil(len(names) / shards)
    weight_map = {}
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: w[n] for n in names[s * per:(s + 1) * per]}
        write_safetensors(f"{dirname}/{fname}", part, dtype)
        weight_map.update({n: fname for n in part})
    with open(f"{dirname}/model.safetensors.index.json", "w") as f:
        json.dump({"metadata": {"total_size": sum(t.numel() * 4 for t in w.values())}, "weight_map": weight_map}, f, indent=2)


ids = torch.randint(3, BASE["vocab_size"], (3, 8))
mask = torch.tensor([[1] * 8, [0, 0, 0] + [1] * 5, [1] * 6 + [0, 0]])
ids = torch.where(mask.bool(), ids, torch.zeros_like(ids))  # pad id 0
golden = {"tokens": ids.tolist(), "attention_mask": mask.tolist(), "models": {}}

for name, tied, dtype, shards in [("untied", False, "F32", 2), ("tied", True, "BF16", 1)]:
    cfg = dict(BASE, tie_word_embeddings=tied)
    w = make_weights(cfg)
    if dtype == "BF16":
        w = {n: bf16_round(t) for n, t in w.items()}
    save(name, cfg, w, dtype, shards)
    with torch.no_grad():
        logits = forward(cfg, w, ids, mask)
        lp = token_logprobs(logits, ids, mask)
    golden["models"][name] = {"logits": logits.flatten().tolist(), "logits_shape": list(logits.shape),
                              "token_logprobs": lp.tolist()}

with open("golden.json", "w") as f:
    json.dump(golden, f)
print("wrote untied/, tied/, golden.json")
