package tokenizer

import (
	"embed"
	"fmt"
)

// The reduced Qwen2.5 tokenizer (256 bytes + 1,770 merges + 22 added tokens =
// 2,048 ids) that the project's tiny from-scratch model uses. Rebuild it with
//
//	go run ./cmd/mcprl tokenizer reduce --tokenizer tokenizer/testdata/qwen2.5 --size 2048 --out tokenizer/small/qwen2.5-2048
//
// (TestSmallIsReduceOutput fails when the files are stale).
//
//go:embed small/qwen2.5-2048/tokenizer.json small/qwen2.5-2048/tokenizer_config.json
var smallFS embed.FS

// SmallDir is where the small tokenizer's files live in the repository
// (relative to the tokenizer package).
const SmallDir = "small/qwen2.5-2048"

// SmallVocabSize is the number of ids of the small tokenizer.
const SmallVocabSize = 2048

// Small loads the embedded reduced Qwen2.5 tokenizer (SmallVocabSize ids; same
// normalizer, split pattern, added tokens and chat template as Qwen2.5).
func Small() (*Tokenizer, error) {
	t, err := LoadFS(smallFS, SmallDir)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: embedded small tokenizer: %w", err)
	}
	return t, nil
}

// LoadWithTemplate loads the tokenizer of dir (Load; "" loads the embedded
// small one, Small) with its compiled chat template.
func LoadWithTemplate(dir string) (*Tokenizer, *Template, error) {
	var (
		t   *Tokenizer
		err error
	)
	if dir != "" {
		t, err = Load(dir)
	} else {
		t, err = Small()
	}
	if err != nil {
		return nil, nil, err
	}
	tpl, err := t.Template()
	if err != nil {
		return nil, nil, fmt.Errorf("tokenizer %s: %w", dir, err)
	}
	return t, tpl, nil
}
