package model

import "testing"

// vocab is a Vocabulary of n ids with the named tokens.
type vocab struct {
	n, eos int
	tokens map[string]int
}

func (v vocab) VocabSize() int { return v.n }
func (v vocab) EOS() int       { return v.eos }
func (v vocab) TokenID(s string) (int, bool) {
	id, ok := v.tokens[s]
	return id, ok
}

// TestTinyConfigFor: the tiny default takes the tokenizer's size, <|im_end|> as EOS (else the tokenizer's EOS),
// <|endoftext|> as padding where there is one, and no BOS.
func TestTinyConfigFor(t *testing.T) {
	c := TinyConfigFor(vocab{n: 2048, eos: 3, tokens: map[string]int{"<|im_end|>": 7, "<|endoftext|>": 5}})
	if c.VocabSize != 2048 || len(c.EOSTokenID) != 1 || c.EOSTokenID[0] != 7 || c.PadTokenID == nil || *c.PadTokenID != 5 || c.BOSTokenID != nil {
		t.Errorf("chat tokenizer: vocab %d, eos %v, pad %v, bos %v; want 2048, [7], 5, none", c.VocabSize, c.EOSTokenID, c.PadTokenID, c.BOSTokenID)
	}
	if c.HiddenSize != TinyConfig(2048, -1, 7).HiddenSize {
		t.Errorf("hidden %d: not the tiny default", c.HiddenSize)
	}
	c = TinyConfigFor(vocab{n: 300, eos: 3})
	if c.VocabSize != 300 || len(c.EOSTokenID) != 1 || c.EOSTokenID[0] != 3 || c.PadTokenID != nil {
		t.Errorf("plain tokenizer: vocab %d, eos %v, pad %v; want 300, [3], none", c.VocabSize, c.EOSTokenID, c.PadTokenID)
	}
}
