// Package gguf reads and writes GGUF files, the model format of llama.cpp and ggml
// (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md): a header, typed
// key-value metadata (hyperparameters, the tokenizer, the chat template),
// tensor infos, and tensor data, aligned, in ggml's block layouts.
//
// Open reads the header, metadata and tensor infos and checks, before any
// tensor buffer is allocated, that every tensor lies inside the file, so a
// truncated download is reported as one. Float32 returns a tensor's values
// dequantized to float32: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and the
// k-quants Q2_K, Q3_K, Q4_K, Q5_K and Q6_K (those of llama.cpp's Q4_K_M, Q5_K_M
// and other mixes) are supported, bit for bit as the gguf Python package
// (gguf-py) dequantizes them; any other ggml type (the IQ and TQ types, MXFP4,
// Q8_K) is an error that names it and the tensor.
//
// Write writes a file, streaming one tensor's data at a time, byte for byte as
// gguf-py's GGUFWriter lays out the same metadata and tensors; Quantize encodes
// float32 values as F32, F16 or Q8_0, bit for bit as gguf-py (and llama.cpp's
// reference quantizers) encode them.
//
// The format's vocabulary (value types, tensor types and their block sizes,
// the magic and alignment) lives in format.go, shared by the reader and the writer.
package gguf
