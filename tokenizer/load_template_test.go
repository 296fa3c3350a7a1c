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
