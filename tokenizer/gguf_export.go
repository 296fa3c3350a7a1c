package tokenizer

// The tokenizer as GGUF metadata (llama.cpp's tokenizer.ggml.* keys), the reverse of GGUFFiles, following
// llama.cpp's convert_hf_to_gguf.py for a byte-level BPE ("gpt2") tokenizer:
//
//	tokenizer.ggml.tokens      every id's token as tokenizer.json spells it (byte-level characters, "Ġthe"; an added
//	                           token's content), "[PAD<id>]" for ids the tokenizer lacks up to the model's vocabulary
//	tokenizer.ggml.token_type  1 normal, 3 control (an added token marked special, or one that looks special:
//	                           <|...|>), 4 user-defined (another added token, e.g. <tool_call>), 5 unused ([PAD<id>])
//	tokenizer.ggml.merges      "a b" in merge order
//	tokenizer.ggml.pre         the pre-tokenizer's name in llama.cpp (the table of gguf.go, read backwards)
//	bos/eos/unknown/padding_token_id, add_bos_token, add_eos_token from tokenizer_config.json; add_space_prefix false
//	tokenizer.chat_template    the chat template

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mcprl/mcprl/gguf"
)

// GGUF token types beside those of gguf.go (llama.cpp's llama_token_type).
const (
	ggufTokenNormal = 1
	ggufTokenUnused = 5
)

// ggufPreOrder is the order in which GGUFMetadata tries the pre-tokenizer names (smollm and starcoder are the
// same pre-tokenizer; SmolLM's converter wrote smollm).
var ggufPreOrder = []string{"qwen2", "llama-bpe", "gpt-2", "smollm", "starcoder"}

// GGUFPre returns the name of the tokenizer's pre-tokenizer in llama.cpp (tokenizer.ggml.pre), or an error naming
// the pre-tokenizer when llama.cpp has none that splits text the same way.
func (t *Tokenizer) GGUFPre() (string, error) {
	for _, name := range ggufPreOrder {
		pt := ggufPreTokenizers[name]
		nfc, err := parseNormalizer(json.RawMessage(pt.normalizer))
		if err != nil {
			return "", err
		}
		pattern, digits, err := parsePreTokenizer(json.RawMessage(pt.preTokenizer))
		if err != nil {
			return "", err
		}
		if nfc == t.nfc && pattern == t.pattern && digits == t.digits {
			return name, nil
		}
	}
	return "", fmt.Errorf("tokenizer %s: its pre-tokenizer (split %q, NFC %v, individual digits %v) is none that llama.cpp "+
		"knows by name here (%s)", t.dir, t.pattern, t.nfc, t.digits, strings.Join(ggufPreOrder, ", "))
}

// GGUFMetadata returns the tokenizer's GGUF metadata for a model of vocabSize embedding rows: ids the tokenizer
// lacks become unused "[PAD<id>]" tokens, as llama.cpp's converter writes them. It fails, naming the cause, when
// the tokenizer has more ids than vocabSize, has no chat template, or has a pre-tokenizer llama.cpp does not know.
func (t *Tokenizer) GGUFMetadata(vocabSize int) ([]gguf.KV, error) {
	fail := func(err error) ([]gguf.KV, error) { return nil, fmt.Errorf("tokenizer %s to GGUF: %w", t.dir, err) }
	if len(t.idBytes) > vocabSize {
		return fail(fmt.Errorf("%d token ids, but the model has %d embedding rows", len(t.idBytes), vocabSize))
	}
	pre, err := t.GGUFPre()
	if err != nil {
		return nil, err
	}
	template, err := t.ChatTemplateSource()
	if err != nil {
		return nil, err
	}
	addedByID := make(map[int]AddedToken, len(t.added))
	for _, a := range t.added {
		addedByID[a.ID] = a
	}
	tokens := make([]string, vocabSize)
	types := make([]int32, vocabSize)
	for id := range tokens {
		a, added := addedByID[id]
		switch {
		case added:
			tokens[id] = a.Content
			types[id] = ggufTokenUserDefined
			if a.Special || looksSpecial(a.Content) {
				types[id] = ggufTokenControl
			}
		case id < len(t.idBytes) && t.idBytes[id] != nil:
			tokens[id] = byteLevelEncode(t.idBytes[id])
			types[id] = ggufTokenNormal
		default:
			tokens[id] = fmt.Sprintf("[PAD%d]", id)
			types[id] = ggufTokenUnused
		}
	}
	var tj struct {
		Model struct {
			Merges json.RawMessage `json:"merges"`
		} `json:"model"`
	}
	if err := json.Unmarshal(t.rawJSON, &tj); err != nil {
		return fail(err)
	}
	pairs, err := parseMerges(tj.Model.Merges)
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
	var cfg struct {
		AddBOS *bool `json:"add_bos_token"`
		AddEOS *bool `json:"add_eos_token"`
	}
	if err := json.Unmarshal(t.rawCfg, &cfg); err != nil {
		return fail(fmt.Errorf("tokenizer_config.json: %w", err))
	}

	meta := []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "gpt2"},
		{Key: "tokenizer.ggml.pre", Value: pre},
		{Key: "tokenizer.ggml.tokens", Value: tokens},
		{Key: "tokenizer.ggml.token_type", Value: types},
		{Key: "tokenizer.ggml.merges", Value: merges},
	}
	for _, s := range []struct {
		key string
		raw json.RawMessage
	}{
		{"tokenizer.ggml.bos_token_id", t.config.BOSToken}, {"tokenizer.ggml.eos_token_id", t.config.EOSToken},
		{"tokenizer.ggml.unknown_token_id", t.config.UnkToken}, {"tokenizer.ggml.padding_token_id", t.config.PadToken},
	} {
		name, err := tokenString(s.raw)
		if err != nil || name == "" {
			continue
		}
		id, ok := t.TokenID(name)
		if !ok {
			return fail(fmt.Errorf("tokenizer_config.json: %q is not a token", name))
		}
		meta = append(meta, gguf.KV{Key: s.key, Value: uint32(id)})
	}
	meta = append(meta,
		gguf.KV{Key: "tokenizer.ggml.add_bos_token", Value: cfg.AddBOS != nil && *cfg.AddBOS},
		gguf.KV{Key: "tokenizer.ggml.add_eos_token", Value: cfg.AddEOS != nil && *cfg.AddEOS},
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
