// Package tokenizer loads a Hugging Face byte-level BPE tokenizer directory
// (tokenizer.json + tokenizer_config.json, as shipped with Qwen2/Qwen2.5/Qwen3
// checkpoints) and encodes, decodes and renders chat templates exactly as the
// Python transformers stack does, so that the token ids a trainer sees are the
// ids the model's own tokenizer makes.
//
// The BPE itself is github.com/pkoukk/tiktoken-go, fed with ranks built from
// tokenizer.json (nothing is downloaded); the pre-tokenizer split pattern runs
// on github.com/dlclark/regexp2 (it needs lookahead); NFC comes from
// golang.org/x/text/unicode/norm. Added tokens (<|im_start|>, <tool_call>, ...)
// are matched leftmost-longest in the raw text before normalisation and BPE,
// as Hugging Face tokenizers does. Text with a very long run of one character
// class is merged with a heap instead of tiktoken-go's quadratic loop, with
// identical results (longpiece.go).
//
// Chat templates (Template) render with internal/jinja (a copy of
// github.com/ardanlabs/jinja with limits on range, sizes, nesting and time,
// as a template from a model's files needs), with tojson replaced by a
// Python json.dumps emulation (pyjson.go). Reduce makes a
// smaller vocabulary (bytes + first K merges + added tokens) that saves as an
// ordinary tokenizer.json; Small is the embedded 2,048-id one.
package tokenizer
