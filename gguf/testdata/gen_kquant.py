"""K-quant test data for package gguf, made with the gguf Python package (gguf-py 0.19.0) and numpy.

gguf-py 0.19.0 dequantizes the k-quants but cannot quantize to them, so their blocks are random bytes whose
f16 super-block scales (d, and dmin for Q2_K, Q4_K, Q5_K) are set to finite values: seeded normal values of a
magnitude that keeps the weights near 1, and in the first blocks 0, -0, a negative value, a subnormal and
float16's maximum. Q5_0 and Q5_1, which gguf-py does quantize, are quantized from seeded normal values.

Writes:
  kquant.gguf           tensors "q2_k", "q3_k", "q4_k", "q5_k", "q6_k" (shapes [3, 512] and, for q4_k_3d,
                        [2, 2, 256]), "q5_0", "q5_1", and "iq4_xs" (random bytes: a type the reader must refuse)
  kquant_expected.gguf  every tensor but iq4_xs as gguf-py's `gguf.quants.dequantize` gives it, F32

Run: python gen_kquant.py   (from this directory, in the venv of python/requirements.lock)
"""
import numpy as np
from gguf import GGMLQuantizationType as T, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

rng = np.random.default_rng(22)

# Byte offsets of the f16 super-block scales in each block, and a magnitude for d (dmin) that keeps
# d*scale*q (dmin*min) of the order of 1.
SCALES = {
    T.Q2_K: [(80, 1 / 20), (82, 1 / 8)],
    T.Q3_K: [(108, 1 / 60)],
    T.Q4_K: [(0, 1 / 400), (2, 1 / 30)],
    T.Q5_K: [(0, 1 / 900), (2, 1 / 30)],
    T.Q6_K: [(208, 1 / 2000)],
}
SPECIAL = [0.0, -0.0, -0.01, 3e-7, 65504.0]  # zero, negative zero, negative, f16 subnormal, f16 max


def kblocks(qtype, shape):
    block, size = GGML_QUANT_SIZES[qtype]
    n = int(np.prod(shape)) // block
    raw = rng.integers(0, 256, (n, size), dtype=np.uint8)
    for off, mag in SCALES[qtype]:
        f = (np.abs(rng.standard_normal(n)) * mag).astype(np.float16)
        f[: len(SPECIAL)] = SPECIAL[:n]
        rng.shuffle(f[: len(SPECIAL)])
        raw[:, off:off + 2] = f.reshape(n, 1).view(np.uint8)
    return raw.reshape(*shape[:-1], shape[-1] // block * size)


w = GGUFWriter("kquant.gguf", arch="llama")
expected = {}
for name, qtype, shape in [("q2_k", T.Q2_K, (3, 512)), ("q3_k", T.Q3_K, (3, 512)), ("q4_k", T.Q4_K, (3, 512)),
                           ("q4_k_3d", T.Q4_K, (2, 2, 256)), ("q5_k", T.Q5_K, (3, 512)), ("q6_k", T.Q6_K, (3, 512))]:
    raw = kblocks(qtype, shape)
    w.add_tensor(name, raw, raw_dtype=qtype)
    expected[name] = dequantize(raw, qtype)
for name, qtype in [("q5_0", T.Q5_0), ("q5_1", T.Q5_1)]:
    x = rng.standard_normal((4, 64)).astype(np.float32) * 3
    x[1, :32] = 0  # a block whose scale is 0
    raw = quantize(x, qtype)
    w.add_tensor(name, raw, raw_dtype=qtype)
    expected[name] = dequantize(raw, qtype)
w.add_tensor("iq4_xs", rng.integers(0, 256, (2, 136), dtype=np.uint8), raw_dtype=T.IQ4_XS)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

e = GGUFWriter("kquant_expected.gguf", arch="llama")
for name, v in expected.items():
    assert v.dtype == np.float32 and np.isfinite(v).all(), name
    e.add_tensor(name, np.ascontiguousarray(v))
e.write_header_to_file()
e.write_kv_data_to_file()
e.write_tensors_to_file()
e.close()
print({k: (v.shape, float(np.abs(v).max()), float(v.std())) for k, v in expected.items()})
