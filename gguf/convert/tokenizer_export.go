package convert

// The tokenizer as GGUF metadata (llama.cpp's tokenizer.ggml.* keys), the reverse of TokenizerFiles, following
// llama.cpp's convert_hf_to_gguf.py for a byte-level BPE ("gpt2") tokenizer:
//
//	tokenizer.ggml.tokens      every id's token as tokenizer.json spells it (byte-level characters, "Ġthe"; an added
//	                           token's content), "[PAD<id>]" for ids the tokenizer lacks up to the model's vocabulary
//	tokenizer.ggml.token_type  1 normal, 3 control (an added token marked special, or one that looks special:
//	                           <|...|>), 4 user-defined (another added token, e.g. <tool_call>), 5 unused ([PAD<id>])
//	tokenizer.ggml.merges      "a b" in merge order
//	tokenizer.ggml.pre         the pre-tokenizer's name in llama.cpp (the table of tokenizer.go, read backwards)
//	bos/eos/unknown/padding_token_id, add_bos_token, add_eos_token from tokenizer_config.json; add_space_prefix false
//	tokenizer.chat_template    the chat template

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mcprl/mcprl/gguf"
	"github.com/mcprl/mcprl/tokenizer"
)

// GGUF token types beside those of tokenizer.go (llama.cpp's llama_token_type).
const (
	ggufTokenNormal = 1
	ggufTokenUnused = 5
)

// ggufPreOrder is the order in which TokenizerMetadata tries the pre-tokenizer names (smollm and starcoder are the
// same pre-tokenizer; SmolLM's converter wrote smollm).
var ggufPreOrder = []string{"qwen2", "llama-bpe", "gpt-2", "smollm", "starcoder"}

// preTokenizerName returns the name of t's pre-tokenizer in llama.cpp (tokenizer.ggml.pre), or an error naming
// the pre-tokenizer when llama.cpp has none that splits text the same way.
func preTokenizerName(t *tokenizer.Tokenizer) (string, error) {
	have := t.PreTokenization()
	for _, name := range ggufPreOrder {
		pt := ggufPreTokenizers[name]
		p, err := tokenizer.ParsePreTokenization(json.RawMessage(pt.normalizer), json.RawMessage(pt.preTokenizer))
		if err != nil {
			return "", err
		}
		if p == have {
			return name, nil
		}
	}
	return "", fmt.Errorf("tokenizer %s: its pre-tokenizer (split %q, NFC %v, individual digits %v) is none that llama.cpp "+
		"knows by name here (%s)", t.Dir(), have.Pattern, have.NFC, have.Digits, strings.Join(ggufPreOrder, ", "))
}

// TokenizerMetadata returns t's GGUF metadata for a model of vocabSize embedding rows: ids the tokenizer
// lacks become unused "[PAD<id>]" tokens, as llama.cpp's converter writes them. It fails, naming the cause, when
// the tokenizer has more ids than vocabSize, has no chat template, or has a pre-tokenizer llama.cpp does not know.
func TokenizerMetadata(t *tokenizer.Tokenizer, vocabSize int) ([]gguf.KV, error) {
	fail := func(err error) ([]gguf.KV, error) { return nil, fmt.Errorf("tokenizer %s to GGUF: %w", t.Dir(), err) }
	if t.VocabSize() > vocabSize {
		return fail(fmt.Errorf("%d token ids, but the model has %d embedding rows", t.VocabSize(), vocabSize))
	}
	pre, err := preTokenizerName(t)
	if err != nil {
		return nil, err
	}
	template, err := t.ChatTemplateSource()
	if err != nil {
		return nil, err
	}
	addedTokens := t.AddedTokens()
	addedByID := make(map[int]tokenizer.AddedToken, len(addedTokens))
	for _, a := range addedTokens {
		addedByID[a.ID] = a
	}
	tokens := make([]string, vocabSize)
	types := make([]int32, vocabSize)
	for id := range tokens {
		a, added := addedByID[id]
		b, inVocab := t.TokenBytes(id)
		switch {
		case added:
			tokens[id] = a.Content
			types[id] = ggufTokenUserDefined
			if a.Special || looksSpecial(a.Content) {
				types[id] = ggufTokenControl
			}
		case inVocab:
			tokens[id] = tokenizer.ByteLevelEncode(b)
			types[id] = ggufTokenNormal
		default:
			tokens[id] = fmt.Sprintf("[PAD%d]", id)
			types[id] = ggufTokenUnused
		}
	}
	pairs, err := t.Merges()
	if err != nil {
		return fail(err)
	}
	merges := make([]string, len(pairs))
	for i, p := range pairs {
		if strings.Contains(p[0], " ") || strings.Contains(p[1], " ") {
			return fail(fmt.Errorf("merge %d %q holds a space, which GGUF's \"a b\" form cannot carry", i, p))
		}
		merges[i] = p[0] + " " + p[1]
	}
	cfg, err := t.ConfigTokens()
	if err != nil {
		return fail(err)
	}

	meta := []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "gpt2"},
		{Key: "tokenizer.ggml.pre", Value: pre},
		{Key: "tokenizer.ggml.tokens", Value: tokens},
		{Key: "tokenizer.ggml.token_type", Value: types},
		{Key: "tokenizer.ggml.merges", Value: merges},
	}
	for _, s := range []struct{ key, name string }{
		{"tokenizer.ggml.bos_token_id", cfg.BOS}, {"tokenizer.ggml.eos_token_id", cfg.EOS},
		{"tokenizer.ggml.unknown_token_id", cfg.Unk}, {"tokenizer.ggml.padding_token_id", cfg.Pad},
	} {
		if s.name == "" {
			continue
		}
		id, ok := t.TokenID(s.name)
		if !ok {
			return fail(fmt.Errorf("tokenizer_config.json: %q is not a token", s.name))
		}
		meta = append(meta, gguf.KV{Key: s.key, Value: uint32(id)})
	}
	meta = append(meta,
		gguf.KV{Key: "tokenizer.ggml.add_bos_token", Value: cfg.AddBOS},
		gguf.KV{Key: "tokenizer.ggml.add_eos_token", Value: cfg.AddEOS},
		gguf.KV{Key: "tokenizer.ggml.add_space_prefix", Value: false}, // the pre-tokenizers above add none
		gguf.KV{Key: "tokenizer.chat_template", Value: template})
	return meta, nil
}

// looksSpecial is llama.cpp's converter's does_token_look_special for the tokens of byte-level BPE vocabularies.
func looksSpecial(s string) bool {
	return slices.Contains([]string{"<pad>", "<mask>", "<2mass>", "[@BOS@]"}, s) ||
		(strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>")) ||
		(strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>")) ||
		(strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">"))
}
