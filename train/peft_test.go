package train

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/gguf/convert"
	"github.com/mcprl/mcprl/model"
)

func tinyModel(t *testing.T) *model.Model {
	t.Helper()
	backend, err := model.NewBackend("")
	if err != nil {
		t.Fatal(err)
	}
	cfg := model.TinyConfig(64, -1, 1)
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 32, 64, 1
	m, err := model.New(backend, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Attach adds a fresh adapter only under use_peft, keeps one the model
// brings, and says which adapter trains.
func TestPeftAttach(t *testing.T) {
	m := tinyModel(t)
	var log bytes.Buffer
	off := DefaultPeftArguments()
	if err := off.Attach(m, "dir", 1, &log); err != nil || m.LoRA() != nil || log.Len() != 0 {
		t.Fatalf("without use_peft: err %v, adapter %v, log %q; want no adapter, nothing said", err, m.LoRA(), log.String())
	}
	on := DefaultPeftArguments()
	on.UsePeft, on.LoraR = true, 4
	if err := on.Attach(m, "dir", 1, &log); err != nil {
		t.Fatal(err)
	}
	if lc := m.LoRA(); lc == nil || lc.R != 4 || lc.Alpha != 32 {
		t.Fatalf("adapter %+v, want r 4, alpha 32", lc)
	}
	if got, want := log.String(), "LoRA: r 4, alpha 32, dropout 0.05, [q_proj v_proj] (base weights frozen)\n"; got != want {
		t.Errorf("log %q, want %q", got, want)
	}
	// A model that brings an adapter keeps it, whatever the arguments say.
	log.Reset()
	other := on
	other.LoraR = 8
	if err := other.Attach(m, "ckpt", 1, &log); err != nil || m.LoRA().R != 4 {
		t.Fatalf("err %v, adapter r %d; want the model's own (r 4)", err, m.LoRA().R)
	}
	if want := "LoRA adapter of ckpt/adapter: r 4"; !strings.HasPrefix(log.String(), want) {
		t.Errorf("log %q, want it to start with %q", log.String(), want)
	}
}

// Attach with trainable_token_indices trains those rows beside the adapter; without them it says which added
// tokens of the chat template stay frozen. Check refuses the key without use_peft.
func TestPeftTrainableTokens(t *testing.T) {
	dir := t.TempDir()
	tpl := "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<tool_call>{}</tool_call>"
	if _, err := convert.ImportGGUF("../model/testdata/tiny-llama.gguf", dir, convert.ImportOptions{ChatTemplate: tpl, AddTokens: []string{"<tool_call>", "</tool_call>"}}); err != nil {
		t.Fatal(err)
	}
	backend, err := model.NewBackend("")
	if err != nil {
		t.Fatal(err)
	}
	for _, listed := range [][]int{nil, {1}, {-2, -1}} {
		m, err := model.Load(backend, dir)
		if err != nil {
			t.Fatal(err)
		}
		V := m.Config.VocabSize
		p := DefaultPeftArguments()
		p.UsePeft = true
		for _, id := range listed {
			if id < 0 {
				id += V
			}
			p.TrainableTokens = append(p.TrainableTokens, id)
		}
		var log bytes.Buffer
		if err := p.Attach(m, dir, 1, &log); err != nil {
			t.Fatal(err)
		}
		if got := m.LoRA().TrainableTokenIndices; !slices.Equal(got, p.TrainableTokens) {
			t.Errorf("adapter's trainable tokens %v, want %v", got, p.TrainableTokens)
		}
		note := fmt.Sprintf("the chat template uses the added tokens <tool_call> (%d), </tool_call> (%d), whose embedding rows stay frozen", V-2, V-1)
		if strings.Contains(log.String(), note) != (len(listed) < 2) {
			t.Errorf("trainable %v: log %q", p.TrainableTokens, log.String())
		}
		if len(listed) == 2 && !strings.Contains(log.String(), fmt.Sprintf("trainable tokens [%d %d]", V-2, V-1)) {
			t.Errorf("log %q does not name the trainable tokens", log.String())
		}
	}
	var c Checker
	p := DefaultPeftArguments()
	p.TrainableTokens = []int{3}
	p.Check(&c)
	var ve *ValueError
	if err := c.Err(); !errors.As(err, &ve) || ve.Key != "trainable_token_indices" {
		t.Errorf("trainable_token_indices without use_peft: %v", err)
	}
}
