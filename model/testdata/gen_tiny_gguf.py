"""Tiny GGUF checkpoints and their logits under transformers, for model/gguf_test.go.

Writes, from seeded random weights (gguf 0.19.0, torch 2.15.0, transformers 5.23.0; run from this directory):
  tiny-llama.gguf  a 2-layer Llama (hidden 64, 4 heads / 2 KV heads, intermediate 256, tied embeddings) with
                   q/k permuted as llama.cpp's converter permutes them, tensors in Q8_0, Q4_0, Q4_1, F16, BF16, F32
  tiny-qwen2.gguf  a 2-layer Qwen2 of the same size with q/k/v biases and an untied output
  tiny-kquant.gguf a 2-layer Llama of hidden 256 (4 heads / 2 KV heads, intermediate 256, tied embeddings: rows of
                   256, whole k-quant super-blocks) quantized by ggml's own reference quantizers
                   (quantize_row_*_ref of llama.cpp's libggml-base.so in node-llama-cpp 3.21.1's prebuilt binary,
                   ../../testdata/npm/llamacpp, called through ctypes; gguf-py cannot quantize to the k-quants):
                   token_embd Q6_K; layer 0 as llama.cpp's Q4_K_M mixes them (Q4_K, attn_v and ffn_down Q6_K);
                   layer 1 Q5_K, Q3_K, Q5_0, Q2_K, Q5_1, Q5_K, Q3_K for attn_q/k/v/output, ffn_gate/up/down
  tiny_gguf_golden.json  for each of the three: tokens and mask of a batch (full, left-padded, right-padded
                   rows), logits [B, T, V] of transformers' model loaded from the GGUF file itself
                   (from_pretrained(gguf_file=...), float32, eager attention), the same in float64 (how far
                   float32 rounding alone moves them), and 8 greedy tokens after row 0.
The tokenizer is byte-level BPE over the 256 byte symbols, eight merges and <|im_start|>, <|im_end|> (pre "gpt-2").
"""
import ctypes
import json
import os

import numpy as np
import torch
from gguf import GGMLQuantizationType as Q, GGUFWriter, TokenType
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import quantize
from transformers import AutoModelForCausalLM

rng = np.random.default_rng(7)
H, HEADS, KV, INTER, LAYERS = 64, 4, 2, 256, 2


def byte_alphabet():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


tokens = byte_alphabet()
merges = ["Ġ t", "h e", "i n", "Ġt he", "Ġ a", "e r", "o n", "Ġ s"]
tokens += [m.replace(" ", "") for m in merges] + ["<|im_start|>", "<|im_end|>"]
types = [TokenType.NORMAL] * (len(tokens) - 2) + [TokenType.CONTROL] * 2
V = len(tokens)
TEMPLATE = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
            "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def permute(w, n_head):  # llama.cpp's convert_hf_to_gguf.py LlamaModel.permute
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


GGML = ctypes.CDLL("../../testdata/npm/llamacpp/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so")
KQUANTS = {Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K}


def ggml_quantize(x, qt):  # ggml's quantize_row_{type}_ref over the whole tensor (rows are whole super-blocks)
    block, size = GGML_QUANT_SIZES[qt]
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.zeros((*x.shape[:-1], x.shape[-1] // block * size), np.uint8)
    fn = getattr(GGML, "quantize_row_q" + qt.name[1:] + "_ref")  # quantize_row_q4_K_ref
    fn(x.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(x.size))
    return out


def write(path, arch, q4k=False, h=H, inter=INTER, qtypes=None, rng=rng):
    """qtypes maps tensor names to the types they are written in instead of the ones below."""
    hd = h // HEADS
    w = GGUFWriter(path, arch=arch)
    w.add_block_count(LAYERS)
    w.add_context_length(256)
    w.add_embedding_length(h)
    w.add_feed_forward_length(inter)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_rope_freq_base(10000.0 if arch == "llama" else 1000000.0)
    w.add_layer_norm_rms_eps(1e-5 if arch == "llama" else 1e-6)
    w.add_rope_dimension_count(hd)
    w.add_vocab_size(V)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(V - 2)
    w.add_eos_token_id(V - 1)
    w.add_pad_token_id(V - 1)
    w.add_chat_template(TEMPLATE)

    def t(name, x, qt):
        x = x.astype(np.float32)
        qt = (qtypes or {}).get(name, qt)
        if qt in KQUANTS:
            w.add_tensor(name, ggml_quantize(x, qt), raw_dtype=qt)
        elif qt == Q.F32:
            w.add_tensor(name, x)
        elif qt == Q.F16:
            w.add_tensor(name, x.astype(np.float16))
        else:
            w.add_tensor(name, quantize(x, qt), raw_dtype=qt)

    def rnd(*shape, s=0.3 * (H / h) ** 0.5):  # matrices keep the gain of hidden size 64 at other sizes
        return rng.standard_normal(shape).astype(np.float32) * s

    t("token_embd.weight", rnd(V, h, s=(H / h) ** 0.5), Q.Q8_0)  # logits of the same size at any hidden size
    for i in range(LAYERS):
        p = f"blk.{i}."
        wq, wk = rnd(h, h), rnd(KV * hd, h)
        if arch == "llama":
            wq, wk = permute(wq, HEADS), permute(wk, KV)
        t(p + "attn_q.weight", wq, Q.Q4_0)
        t(p + "attn_k.weight", wk, Q.Q4_1)
        t(p + "attn_v.weight", rnd(KV * hd, h), Q.Q8_0)
        t(p + "attn_output.weight", rnd(h, h), Q.BF16)
        if arch == "qwen2":
            t(p + "attn_q.bias", rnd(h, s=0.1), Q.F32)
            t(p + "attn_k.bias", rnd(KV * hd, s=0.1), Q.F32)
            t(p + "attn_v.bias", rnd(KV * hd, s=0.1), Q.F32)
        t(p + "ffn_gate.weight", rnd(inter, h), Q.Q4_1)
        t(p + "ffn_up.weight", rnd(inter, h), Q.F16)
        if q4k:
            w.add_tensor(p + "ffn_down.weight", rng.integers(0, 256, (h, inter // 256 * 144), dtype=np.uint8), raw_dtype=Q.Q4_K)
        else:
            t(p + "ffn_down.weight", rnd(h, inter), Q.Q8_0)
        t(p + "attn_norm.weight", 1 + rnd(h, s=0.1), Q.F32)
        t(p + "ffn_norm.weight", 1 + rnd(h, s=0.1), Q.F32)
    t("output_norm.weight", 1 + rnd(h, s=0.1), Q.F32)
    if arch == "qwen2":
        t("output.weight", rnd(V, h), Q.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def reference(path, tt, mm):
    """transformers' logits for the GGUF file at path in float32 and float64, and its greedy tokens after row 0."""
    m = AutoModelForCausalLM.from_pretrained(os.path.dirname(path) or ".", gguf_file=os.path.basename(path),
                                             dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        pos = (mm.cumsum(-1) - 1).clamp(min=0)
        logits = m(input_ids=tt, attention_mask=mm, position_ids=pos).logits
        out = m.generate(tt[:1], attention_mask=mm[:1], do_sample=False, max_new_tokens=8, eos_token_id=None,
                         pad_token_id=V - 1)
        # float64, each row alone without its padding (padding makes NaN in float64: 0 * NaN in probs @ v)
        m.double()
        logits64 = torch.zeros(logits.shape, dtype=torch.float64)
        for b in range(len(tt)):
            keep = mm[b].bool()
            logits64[b, keep] = m(input_ids=tt[b, keep][None]).logits[0]
    return {"architecture": type(m).__name__, "logits": logits.flatten().tolist(),
            "logits64": logits64.flatten().tolist(), "greedy": out[0, tt.shape[1]:].tolist()}


golden = {}
T = 10
toks = rng.integers(0, V - 2, (3, T)).tolist()
mask = [[1] * T, [0] * 3 + [1] * (T - 3), [1] * (T - 4) + [0] * 4]
tt, mm = torch.tensor(toks), torch.tensor(mask)
for arch in ["llama", "qwen2"]:
    state = rng.bit_generator.state
    write(f"tiny-{arch}.gguf", arch)
    if arch == "llama":
        # tiny-llama with ffn_down in Q4_K (random bytes) was written here, a quantization the import refused
        # before it dequantized the k-quants; its draws are kept, unwritten, so that the files below stay the same.
        rng.bit_generator.state = state
        write(os.devnull, arch, q4k=True)
    golden[arch] = reference(f"tiny-{arch}.gguf", tt, mm)

KTYPES = {"token_embd.weight": Q.Q6_K}
for i, row in enumerate([[Q.Q4_K, Q.Q4_K, Q.Q6_K, Q.Q4_K, Q.Q4_K, Q.Q4_K, Q.Q6_K],
                         [Q.Q5_K, Q.Q3_K, Q.Q5_0, Q.Q2_K, Q.Q5_1, Q.Q5_K, Q.Q3_K]]):
    for name, qt in zip(["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"], row):
        KTYPES[f"blk.{i}.{name}.weight"] = qt
krng = np.random.default_rng(8)
write("tiny-kquant.gguf", "llama", h=256, qtypes=KTYPES, rng=krng)
golden["kquant"] = reference("tiny-kquant.gguf", tt, mm)

golden["tokens"], golden["attention_mask"] = toks, mask
with open("tiny_gguf_golden.json", "w") as f:
    json.dump(golden, f)
print({a: golden[a]["architecture"] for a in ["llama", "qwen2", "kquant"]})
