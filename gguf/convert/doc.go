// Package convert converts between Hugging Face model directories and GGUF files (llama.cpp's format, read and
// written by package gguf), model weights and tokenizer both, as llama.cpp's convert_hf_to_gguf.py and
// transformers' GGUF loader do.
//
// ImportGGUF writes a GGUF checkpoint (Llama or Qwen2, any type gguf dequantizes) as a model directory that
// model.Load and tokenizer.Load read: ConfigFromGGUF reads the hyperparameters, TokenizerFiles rebuilds
// tokenizer.json and tokenizer_config.json from the tokenizer.ggml.* metadata. ExportGGUF writes a model directory
// as a GGUF file that llama.cpp and Ollama load, with TokenizerMetadata for the tokenizer. Both refuse, naming
// it, what the other side would read differently.
//
// The package sits above model and tokenizer, which know nothing of GGUF.
package convert
