"""Quantization test data for package gguf, made with the gguf Python package (gguf-py 0.19.0) and numpy.

Writes quant.gguf: "source", float32 values [6, 64] (seeded normal values times 3, a block of zeros, a block of
halves that round away from zero, float16's extremes and values beyond its range), and the same values as
gguf-py encodes them: "f16" (numpy's astype(float16)) and "q8_0" (gguf.quants.quantize).

Run: python gen_quant.py   (from this directory, in the venv of python/requirements.lock)
"""
import numpy as np
from gguf import GGMLQuantizationType as T, GGUFWriter
from gguf.quants import quantize

rng = np.random.default_rng(21)
x = rng.standard_normal((6, 64)).astype(np.float32) * 3
x[1, :32] = 0                                          # a block whose scale is 0
x[2, :32] = np.arange(32, dtype=np.float32) - 15.5     # with max 15.5, x * 127/15.5 lands on many halves
x[3, :8] = [0, -0.0, 1e-8, 6.1e-5, 65504, -65520, 7e4, -1e-40]  # f16 subnormal, max, ties and overflow
x[4] *= 1e-6                                           # small scales

w = GGUFWriter("quant.gguf", arch="llama")
w.add_tensor("source", x)
w.add_tensor("f16", x.astype(np.float16))
q = quantize(x, T.Q8_0)
w.add_tensor("q8_0", q, raw_dtype=T.Q8_0)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
