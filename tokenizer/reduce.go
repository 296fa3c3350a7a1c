package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// ReduceTo is Reduce to size ids in all: k = size - 256 - the added tokens.
func (t *Tokenizer) ReduceTo(size int) (*Tokenizer, error) {
	k := size - 256 - len(t.AddedTokens())
	if k < 0 {
		return nil, fmt.Errorf("%d ids are fewer than the 256 byte tokens + %d added tokens", size, len(t.AddedTokens()))
	}
	return t.Reduce(k)
}

// Reduce returns a smaller tokenizer for models trained from scratch: the 256
// byte tokens, the first k merges (with the tokens they make) and all added
// tokens, renumbered compactly (bytes and merges keep their relative order;
// added tokens follow, in their relative order). It is still ordinary
// byte-level BPE with the same normalizer, pre-tokenizer, decoder and chat
// template, so Save writes a tokenizer.json + tokenizer_config.json that
// Hugging Face loads like any Qwen2 tokenizer. Every string still encodes
// (into more tokens) and decodes back.
func (t *Tokenizer) Reduce(k int) (*Tokenizer, error) {
	if k < 0 || k >= t.numMerge {
		return nil, fmt.Errorf("tokenizer reduce: %d merges asked, want 0 <= k < %d", k, t.numMerge)
	}
	top, err := orderedObject(t.rawJSON)
	if err != nil {
		return nil, fmt.Errorf("tokenizer reduce: tokenizer.json: %w", err)
	}
	var tj struct{ AddedTokens []AddedToken }
	if err := json.Unmarshal(top.get("added_tokens"), &tj.AddedTokens); err != nil {
		return nil, fmt.Errorf("tokenizer reduce: added_tokens: %w", err)
	}
	model, err := orderedObject(top.get("model"))
	if err != nil {
		return nil, fmt.Errorf("tokenizer reduce: model: %w", err)
	}
	var vocab map[string]int
	if err := json.Unmarshal(model.get("vocab"), &vocab); err != nil {
		return nil, fmt.Errorf("tokenizer reduce: model.vocab: %w", err)
	}
	mergesRaw := model.get("merges")
	merges, err := parseMerges(mergesRaw)
	if err != nil {
		return nil, err
	}

	// Keep the byte tokens and the products of the first k merges; each merge's
	// parts must already be kept (they are, in a rank-ordered BPE).
	keep := make(map[string]bool, 256+k)
	for b := 0; b < 256; b++ {
		keep[ByteLevelEncode([]byte{byte(b)})] = true
	}
	for i, m := range merges[:k] {
		if !keep[m[0]] || !keep[m[1]] {
			return nil, fmt.Errorf("tokenizer reduce: merge %d %q uses a token made by a later merge", i, m)
		}
		keep[m[0]+m[1]] = true
	}
	kept := make([]string, 0, len(keep))
	for tok := range keep {
		if _, ok := vocab[tok]; !ok {
			return nil, fmt.Errorf("tokenizer reduce: %q is not in the vocabulary", tok)
		}
		kept = append(kept, tok)
	}
	sort.Slice(kept, func(i, j int) bool { return vocab[kept[i]] < vocab[kept[j]] })

	var newVocab bytes.Buffer
	newVocab.WriteByte('{')
	for id, tok := range kept {
		if id > 0 {
			newVocab.WriteByte(',')
		}
		writeJSON(&newVocab, tok)
		newVocab.WriteByte(':')
		newVocab.WriteString(strconv.Itoa(id))
	}
	newVocab.WriteByte('}')
	model.set("vocab", newVocab.Bytes())
	model.set("merges", firstMerges(mergesRaw, k))

	// Added tokens: renumbered after the vocabulary, in their id order.
	added := append([]AddedToken(nil), tj.AddedTokens...)
	sort.SliceStable(added, func(i, j int) bool { return added[i].ID < added[j].ID })
	oldToNew := make(map[int]int, len(added))
	for i := range added {
		oldToNew[added[i].ID] = len(kept) + i
	}
	newAdded := make([]AddedToken, len(tj.AddedTokens)) // tokenizer.json order kept
	for i, a := range tj.AddedTokens {
		a.ID = oldToNew[a.ID]
		newAdded[i] = a
	}

	if pp := top.get("post_processor"); pp != nil && string(pp) != "null" {
		if err := checkByteLevel(pp, "post_processor"); err != nil {
			return nil, fmt.Errorf("tokenizer reduce: %w (token ids in it would need renumbering)", err)
		}
	}
	addedJSON, err := marshalNoEscape(newAdded)
	if err != nil {
		return nil, err
	}
	top.set("added_tokens", addedJSON)
	top.set("model", model.bytes())
	newJSON, err := indentJSON(top.bytes())
	if err != nil {
		return nil, fmt.Errorf("tokenizer reduce: %w", err)
	}

	cfg, err := orderedObject(t.rawCfg)
	if err != nil {
		return nil, fmt.Errorf("tokenizer reduce: tokenizer_config.json: %w", err)
	}
	if raw := cfg.get("added_tokens_decoder"); raw != nil {
		dec, err := orderedObject(raw)
		if err != nil {
			return nil, fmt.Errorf("tokenizer reduce: added_tokens_decoder: %w", err)
		}
		var out orderedObj
		for _, kv := range dec {
			old, err := strconv.Atoi(kv.key)
			if err != nil {
				return nil, fmt.Errorf("tokenizer reduce: added_tokens_decoder key %q: %w", kv.key, err)
			}
			id, ok := oldToNew[old]
			if !ok {
				return nil, fmt.Errorf("tokenizer reduce: added_tokens_decoder has id %d, not an added token of tokenizer.json", old)
			}
			out = append(out, keyVal{strconv.Itoa(id), kv.val})
		}
		cfg.set("added_tokens_decoder", out.bytes())
	}
	newCfg, err := indentJSON(cfg.bytes())
	if err != nil {
		return nil, fmt.Errorf("tokenizer reduce: %w", err)
	}

	r, err := Parse(newJSON, newCfg)
	if err != nil {
		return nil, fmt.Errorf("tokenizer reduce: the reduced tokenizer does not load: %w", err)
	}
	return r, nil
}

// Save writes tokenizer.json and tokenizer_config.json into dir (created if needed).
func (t *Tokenizer) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("tokenizer save: %w", err)
	}
	for name, data := range map[string][]byte{"tokenizer.json": t.rawJSON, "tokenizer_config.json": t.rawCfg} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("tokenizer save: %w", err)
		}
	}
	return nil
}

// firstMerges returns the JSON array of the first k entries of a merges array,
// each written as it was (string "a b" or pair ["a", "b"]).
func firstMerges(raw json.RawMessage, k int) []byte {
	var items []json.RawMessage
	_ = json.Unmarshal(raw, &items) // parseMerges already accepted it
	var b bytes.Buffer
	b.WriteByte('[')
	for i, it := range items[:k] {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// keyVal and orderedObj hold a JSON object's members in file order, so that
// rewriting a few of them leaves the rest of the file as it was.
type keyVal struct {
	key string
	val json.RawMessage
}

type orderedObj []keyVal

func orderedObject(raw []byte) (orderedObj, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	var o orderedObj
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		o = append(o, keyVal{k.(string), v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("trailing data after the JSON object")
	}
	return o, nil
}

func (o orderedObj) get(key string) json.RawMessage {
	for _, kv := range o {
		if kv.key == key {
			return kv.val
		}
	}
	return nil
}

func (o *orderedObj) set(key string, val []byte) {
	for i := range *o {
		if (*o)[i].key == key {
			(*o)[i].val = val
			return
		}
	}
	*o = append(*o, keyVal{key, val})
}

func (o orderedObj) bytes() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, kv := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSON(&b, kv.key)
		b.WriteByte(':')
		b.Write(kv.val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// writeJSON writes v as JSON without HTML escaping (<|im_start|> stays readable).
func writeJSON(b *bytes.Buffer, v any) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // strings and plain structs cannot fail
	b.Truncate(b.Len() - 1)
}

func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

func indentJSON(raw []byte) ([]byte, error) {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}
