package train

import (
	"bytes"
	"strings"
	"testing"

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
