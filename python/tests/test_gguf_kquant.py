"""`mcprl model import` of k-quant GGUF tensors checked against llama.cpp's own quantizers and dequantizers.

gguf-py 0.19.0 dequantizes the k-quants but cannot quantize to them, so the blocks here come from llama.cpp
itself: `quantize_row_{type}_ref` of the libggml-base.so in node-llama-cpp 3.21.1's prebuilt binary
(testdata/npm/llamacpp), called through ctypes. A tiny Qwen2 (hidden 256, so rows are whole super-blocks; Qwen2
because its q/k rows are stored unpermuted) has every matrix in one of Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q5_0 and
Q5_1; mcprl imports it, and each tensor of its model.safetensors must equal, bit for bit, llama.cpp's
`dequantize_row_{type}` and gguf-py's `gguf.quants.dequantize` of the same bytes, and lie within the quantizer's
own error of the values that were quantized.
"""

from __future__ import annotations

import ctypes
import os
import pathlib

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q, GGUFReader, GGUFValueType, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize
from safetensors.numpy import load_file

from conftest import REPO, run_mcprl

LIBGGML = REPO / "testdata/npm/llamacpp/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so"
TOKENIZER_FROM = REPO / "model/testdata/tiny-qwen2.gguf"  # its tokenizer and chat template metadata are reused

# Relative RMS error of ggml's reference quantizers on standard normal rows, as measured with this library
# (Q2_K 0.296, Q3_K 0.153, Q4_K 0.0717, Q5_K 0.0363, Q6_K 0.0177, Q5_0 0.0420, Q5_1 0.0382), with a margin of
# a quarter. A tensor read with a wrong layout is uncorrelated with its source (relative error about 1.4).
REL_ERR = {Q.Q2_K: 0.37, Q.Q3_K: 0.19, Q.Q4_K: 0.09, Q.Q5_K: 0.045, Q.Q6_K: 0.022, Q.Q5_0: 0.053, Q.Q5_1: 0.048}

H, HEADS, KV, INTER, LAYERS = 256, 4, 2, 256, 2
MATRICES = {  # GGUF name: HF name, shape
    "token_embd": ("model.embed_tokens", None),
    "output": ("lm_head", None),
    **{
        f"blk.{i}.{g}": (f"model.layers.{i}.{hf}", shape)
        for i in range(LAYERS)
        for g, hf, shape in [
            ("attn_q", "self_attn.q_proj", (H, H)),
            ("attn_k", "self_attn.k_proj", (KV * H // HEADS, H)),
            ("attn_v", "self_attn.v_proj", (KV * H // HEADS, H)),
            ("attn_output", "self_attn.o_proj", (H, H)),
            ("ffn_gate", "mlp.gate_proj", (INTER, H)),
            ("ffn_up", "mlp.up_proj", (INTER, H)),
            ("ffn_down", "mlp.down_proj", (H, INTER)),
        ]
    },
}


def _ggml() -> ctypes.CDLL:
    if not LIBGGML.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{LIBGGML} missing under CI (scripts/test-setup.sh runs npm ci in testdata/npm/llamacpp)")
        pytest.skip("node-llama-cpp is not installed (cd testdata/npm/llamacpp && npm ci)")
    return ctypes.CDLL(str(LIBGGML))


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return a.ctypes.data_as(ctypes.c_void_p)


def _ggml_quantize(lib: ctypes.CDLL, x: np.ndarray, qtype: Q) -> np.ndarray:
    block, size = GGML_QUANT_SIZES[qtype]
    out = np.zeros((*x.shape[:-1], x.shape[-1] // block * size), np.uint8)
    getattr(lib, f"quantize_row_q{qtype.name[1:]}_ref")(_ptr(x), _ptr(out), ctypes.c_int64(x.size))
    return out


def _ggml_dequantize(lib: ctypes.CDLL, raw: np.ndarray, qtype: Q, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, np.float32)
    getattr(lib, f"dequantize_row_q{qtype.name[1:]}")(_ptr(raw), _ptr(out), ctypes.c_int64(out.size))
    return out


def _write_model(path: pathlib.Path, lib: ctypes.CDLL) -> dict[str, tuple[Q, np.ndarray, np.ndarray]]:
    """Writes the tiny Qwen2; returns, per GGUF tensor name, its type, source values and quantized bytes."""
    src = GGUFReader(TOKENIZER_FROM)
    vocab = len(src.fields["tokenizer.ggml.tokens"].contents())
    w = GGUFWriter(str(path), arch="qwen2")
    w.add_block_count(LAYERS)
    w.add_context_length(256)
    w.add_embedding_length(H)
    w.add_feed_forward_length(INTER)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    for key, field in src.fields.items():
        if key.startswith("tokenizer."):
            sub = field.types[-1] if field.types[0] == GGUFValueType.ARRAY else None
            w.add_key_value(key, field.contents(), field.types[0], sub_type=sub)
    rng = np.random.default_rng(23)
    types = list(REL_ERR)
    quantized = {}
    for n, (name, (_, shape)) in enumerate(MATRICES.items()):
        qtype = types[n % len(types)]
        x = rng.standard_normal(shape or (vocab, H)).astype(np.float32) * 0.1
        raw = _ggml_quantize(lib, x, qtype)
        w.add_tensor(f"{name}.weight", raw, raw_dtype=qtype)
        quantized[name] = (qtype, x, raw)
    ones = np.ones(H, np.float32)
    for i in range(LAYERS):
        w.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        w.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
        for b, n in [("attn_q", H), ("attn_k", KV * H // HEADS), ("attn_v", KV * H // HEADS)]:
            w.add_tensor(f"blk.{i}.{b}.bias", rng.standard_normal(n).astype(np.float32) * 0.1)
    w.add_tensor("output_norm.weight", ones)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return quantized


def test_import_kquants_matches_ggml(mcprl: pathlib.Path, tmp_path: pathlib.Path) -> None:
    lib = _ggml()
    quantized = _write_model(tmp_path / "kquant.gguf", lib)
    assert {q for q, _, _ in quantized.values()} == set(REL_ERR)
    run_mcprl(mcprl, "model", "import", "--from", str(tmp_path / "kquant.gguf"), "--out", str(tmp_path / "hf"))
    ours = load_file(tmp_path / "hf" / "model.safetensors")
    for name, (qtype, x, raw) in quantized.items():
        got = ours[MATRICES[name][0] + ".weight"]
        ggml = _ggml_dequantize(lib, raw, qtype, x.shape)
        py = dequantize(raw, qtype)
        assert got.dtype == np.float32 and got.shape == x.shape, name
        assert np.array_equal(ggml.view(np.uint32), py.view(np.uint32)), f"{name} ({qtype.name}): ggml != gguf-py"
        assert np.array_equal(got.view(np.uint32), ggml.view(np.uint32)), (
            f"{name} ({qtype.name}): mcprl differs from ggml by up to {np.abs(got - ggml).max()}")
        rel = float(np.sqrt(((got - x) ** 2).mean() / (x ** 2).mean()))
        assert rel < REL_ERR[qtype], f"{name} ({qtype.name}): relative error {rel:.3g} from the source"
