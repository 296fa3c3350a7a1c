package convert

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/gguf"
)

// TestTokenizerFilesFromSmolLM2: with $MCPRL_SMOLLM2_GGUF set, TokenizerFiles rebuilds package tokenizer's
// testdata/smollm2 byte for byte.
func TestTokenizerFilesFromSmolLM2(t *testing.T) {
	path := smolLM2GGUF(t)
	r, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tj, tc, err := TokenizerFiles(r, TokenizerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{"tokenizer.json": tj, "tokenizer_config.json": tc} {
		want, err := os.ReadFile(filepath.Join(tokenizerDir("testdata/smollm2"), name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from testdata/smollm2/%s", name, name)
		}
	}
}

// TestTokenizerFilesRejects: a GGUF whose tokenizer this package cannot reproduce is refused, naming what.
func TestTokenizerFilesRejects(t *testing.T) {
	r, err := gguf.Open(filepath.Join("..", "testdata", "types.gguf")) // no tokenizer metadata
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, _, err := TokenizerFiles(r, TokenizerOptions{}); err == nil || !strings.Contains(err.Error(), `"tokenizer.ggml.model" missing`) {
		t.Errorf("err = %v", err)
	}
}
