package tokenizer

import (
	"strings"
	"testing"
)

// LoadWithTemplate loads a directory's tokenizer, or the embedded small one
// for "", with its chat template; a missing directory is an error naming it.
func TestLoadWithTemplate(t *testing.T) {
	for _, dir := range []string{"", "small/qwen2.5-2048"} {
		tok, tpl, err := LoadWithTemplate(dir)
		if err != nil || tok == nil || tpl == nil || tok.VocabSize() != SmallVocabSize {
			t.Errorf("%q: %v, %v, %v", dir, tok, tpl, err)
		}
	}
	if _, _, err := LoadWithTemplate("no/such/dir"); err == nil || !strings.Contains(err.Error(), "no/such/dir") {
		t.Errorf("missing directory: %v", err)
	}
}

// ReduceTo keeps as many merges as make size ids, and refuses a size below
// the byte and added tokens.
func TestReduceTo(t *testing.T) {
	tok, err := Small()
	if err != nil {
		t.Fatal(err)
	}
	r, err := tok.ReduceTo(600)
	if err != nil || r.VocabSize() != 600 {
		t.Fatalf("%v, %v", r, err)
	}
	if _, err := tok.ReduceTo(256); err == nil || !strings.Contains(err.Error(), "256 byte tokens") {
		t.Errorf("too small: %v", err)
	}
}
