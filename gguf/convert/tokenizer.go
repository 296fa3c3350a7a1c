package convert

// A tokenizer from GGUF metadata (llama.cpp's tokenizer.ggml.* keys), written as the Hugging Face tokenizer.json
// and tokenizer_config.json that tokenizer.Load (and transformers) read.
//
// tokenizer.ggml.model must be "gpt2" (byte-level BPE). tokenizer.ggml.pre names the pre-tokenizer, as llama.cpp's
// converter recorded it from the original tokenizer.json; each supported name maps back to that pre-tokenizer:
//
//	smollm, starcoder: Digits(individual_digits) then ByteLevel with the GPT-2 split (SmolLM, SmolLM2, StarCoder)
//	gpt-2:             ByteLevel with the GPT-2 split
//	qwen2:             NFC, then Split(Qwen2's regex) and ByteLevel
//	llama-bpe:         Split(Llama 3's regex) and ByteLevel
//
// Tokens of type control (3) or user-defined (4) become added tokens (special when control), as llama.cpp's
// converter marked HF's added tokens; every token stays in the vocabulary at its id.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/mcprl/mcprl/gguf"
	"github.com/mcprl/mcprl/tokenizer"
)

// GGUF token types (llama.cpp's llama_token_type).
const (
	ggufTokenControl     = 3
	ggufTokenUserDefined = 4
)

const (
	qwen2Pattern  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// ggufPreTokenizers maps tokenizer.ggml.pre to tokenizer.json's normalizer and pre_tokenizer.
var ggufPreTokenizers = map[string]struct{ normalizer, preTokenizer string }{
	"smollm":    {"null", digitsByteLevel},
	"starcoder": {"null", digitsByteLevel},
	"gpt-2":     {"null", `{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}`},
	"qwen2":     {`{"type":"NFC"}`, splitByteLevel(qwen2Pattern)},
	"llama-bpe": {"null", splitByteLevel(llama3Pattern)},
}

const digitsByteLevel = `{"type":"Sequence","pretokenizers":[{"type":"Digits","individual_digits":true},` +
	`{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}]}`

func splitByteLevel(pattern string) string {
	p, _ := json.Marshal(pattern)
	return `{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":` + string(p) +
		`},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false}]}`
}

// TokenizerOptions changes what TokenizerFiles writes.
type TokenizerOptions struct {
	// ChatTemplate, when set, replaces the file's tokenizer.chat_template.
	ChatTemplate string
	// AddTokens are appended to the vocabulary as added tokens that are not special (as Qwen2.5's <tool_call>
	// and </tool_call> are), with the next ids; the model's embeddings must grow to match.
	AddTokens []string
}

// TokenizerFiles builds tokenizer.json and tokenizer_config.json from a GGUF file's tokenizer metadata
// (tokenizer.ggml.model, pre, tokens, token_type, merges, bos/eos/unknown/padding_token_id, tokenizer.chat_template).
// The result loads with tokenizer.Load, byte for byte as Hugging Face's tokenizers library loads it.
func TokenizerFiles(r *gguf.Reader, opts TokenizerOptions) (tokenizerJSON, tokenizerConfig []byte, err error) {
	fail := func(err error) ([]byte, []byte, error) {
		return nil, nil, fmt.Errorf("tokenizer from %s: %w", r.Path(), err)
	}
	kind, err := r.String("tokenizer.ggml.model")
	if err != nil {
		return fail(err)
	}
	if kind != "gpt2" {
		return fail(fmt.Errorf("tokenizer.ggml.model %q is not supported (only gpt2, byte-level BPE)", kind))
	}
	pre, err := r.String("tokenizer.ggml.pre")
	if err != nil {
		return fail(err)
	}
	pt, ok := ggufPreTokenizers[pre]
	if !ok {
		return fail(fmt.Errorf("tokenizer.ggml.pre %q is not supported (smollm, starcoder, gpt-2, qwen2, llama-bpe)", pre))
	}
	tokens, err := r.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return fail(err)
	}
	types, err := r.Ints("tokenizer.ggml.token_type")
	if err != nil {
		return fail(err)
	}
	if len(types) != len(tokens) {
		return fail(fmt.Errorf("%d token types for %d tokens", len(types), len(tokens)))
	}
	for _, t := range opts.AddTokens {
		if slices.Contains(tokens, t) {
			return fail(fmt.Errorf("token %q to add is already in the vocabulary", t))
		}
		tokens = append(slices.Clip(tokens), t)
		types = append(slices.Clip(types), ggufTokenUserDefined)
	}
	merges, err := r.Strings("tokenizer.ggml.merges")
	if err != nil {
		return fail(err)
	}
	special := func(key string) (string, bool) {
		id, err := r.Uint(key)
		if err != nil || id >= uint64(len(tokens)) {
			return "", false
		}
		return tokens[id], true
	}

	// tokenizer.json, keys in the order transformers writes them.
	var b bytes.Buffer
	b.WriteString("{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [")
	var added []int
	for id, ty := range types {
		if ty == ggufTokenControl || ty == ggufTokenUserDefined {
			added = append(added, id)
		}
	}
	for i, id := range added {
		a := rawJSON(tokenizer.AddedToken{ID: id, Content: tokens[id], Special: types[id] == ggufTokenControl})
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n    ")
		b.Write(a)
	}
	b.WriteString("\n  ],\n  \"normalizer\": " + pt.normalizer + ",\n  \"pre_tokenizer\": " + pt.preTokenizer +
		",\n  \"post_processor\": null,\n" +
		"  \"decoder\": {\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":true},\n" +
		"  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n" +
		"    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n    \"fuse_unk\": false,\n" +
		"    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n    \"vocab\": {")
	for id, tok := range tokens {
		k := rawJSON(tok)
		if id > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n      ")
		b.Write(k)
		b.WriteString(": " + strconv.Itoa(id))
	}
	b.WriteString("\n    },\n    \"merges\": [")
	for i, m := range merges {
		a, c, ok := bytes.Cut([]byte(m), []byte(" "))
		if !ok {
			return fail(fmt.Errorf("tokenizer.ggml.merges[%d] %q has no space", i, m))
		}
		pair := rawJSON([2]string{string(a), string(c)})
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n      ")
		b.Write(pair)
	}
	b.WriteString("\n    ]\n  }\n}\n")
	tokenizerJSON = b.Bytes()

	// tokenizer_config.json.
	cfg := orderedJSON{}
	cfg.add("add_bos_token", boolOr(r, "tokenizer.ggml.add_bos_token", false))
	cfg.add("add_eos_token", boolOr(r, "tokenizer.ggml.add_eos_token", false))
	cfg.add("added_tokens_decoder", addedDecoder(added, tokens, types))
	for _, s := range []struct{ name, key string }{
		{"bos_token", "tokenizer.ggml.bos_token_id"}, {"eos_token", "tokenizer.ggml.eos_token_id"},
		{"pad_token", "tokenizer.ggml.padding_token_id"}, {"unk_token", "tokenizer.ggml.unknown_token_id"},
	} {
		if tok, ok := special(s.key); ok {
			cfg.add(s.name, tok)
		} else {
			cfg.add(s.name, nil)
		}
	}
	if _, ok := special("tokenizer.ggml.eos_token_id"); !ok {
		return fail(fmt.Errorf("tokenizer.ggml.eos_token_id missing or out of range"))
	}
	if opts.ChatTemplate != "" {
		cfg.add("chat_template", opts.ChatTemplate)
	} else if tpl, err := r.String("tokenizer.chat_template"); err == nil {
		cfg.add("chat_template", tpl)
	}
	cfg.add("clean_up_tokenization_spaces", false)
	if n, err := r.Uint(mustArch(r) + ".context_length"); err == nil {
		cfg.add("model_max_length", n)
	}
	cfg.add("tokenizer_class", "GPT2Tokenizer")
	if tokenizerConfig, err = cfg.marshal(); err != nil {
		return fail(err)
	}
	if _, err := tokenizer.Parse(tokenizerJSON, tokenizerConfig); err != nil {
		return fail(err)
	}
	return tokenizerJSON, tokenizerConfig, nil
}

func mustArch(r *gguf.Reader) string {
	a, _ := r.String("general.architecture")
	return a
}

func boolOr(r *gguf.Reader, key string, def bool) bool {
	if v, err := r.Bool(key); err == nil {
		return v
	}
	return def
}

// addedDecoder is tokenizer_config.json's added_tokens_decoder, ordered by id.
func addedDecoder(added []int, tokens []string, types []int) json.RawMessage {
	o := orderedJSON{}
	for _, id := range added {
		o.add(strconv.Itoa(id), map[string]any{
			"content": tokens[id], "lstrip": false, "normalized": false, "rstrip": false,
			"single_word": false, "special": types[id] == ggufTokenControl,
		})
	}
	b, _ := o.marshal()
	return bytes.TrimRight(b, "\n")
}

// orderedJSON is a JSON object that keeps its keys in insertion order.
type orderedJSON struct {
	keys []string
	vals []any
}

func (o *orderedJSON) add(k string, v any) { o.keys = append(o.keys, k); o.vals = append(o.vals, v) }

// rawJSON is json.Marshal without HTML escaping (tokens such as <|im_start|> stay readable), for values that
// always marshal (strings, numbers, bools, nil, maps and structs of them).
func rawJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("convert: marshal %T: %v", v, err))
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func (o *orderedJSON) marshal() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("{")
	for i, k := range o.keys {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n  ")
		b.Write(rawJSON(k))
		b.WriteString(": ")
		b.Write(rawJSON(o.vals[i]))
	}
	b.WriteString("\n}\n")
	return b.Bytes(), nil
}
