package sampling

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Load reads trainer_state.json's "generation" (the system prompt
// included), and a folder without the file or without the key has none.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if s, err := Load(dir); s != nil || err != nil {
		t.Errorf("no trainer_state.json: %v, %v", s, err)
	}
	write := func(v any) {
		t.Helper()
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, StateFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(map[string]any{"global_step": 3})
	if s, err := Load(dir); s != nil || err != nil {
		t.Errorf("no generation key: %v, %v", s, err)
	}
	two := 2
	want := Settings{Temperature: 0.6, TopP: 1, MaxPromptLength: 512, MaxCompletionLength: 192, MaxToolCallingIterations: &two, SystemPrompt: "You are an agent."}
	write(map[string]any{"global_step": 3, "generation": want})
	s, err := Load(dir)
	if err != nil || s == nil {
		t.Fatalf("%v, %v", s, err)
	}
	if s.String() != want.String() || s.SystemPrompt != want.SystemPrompt {
		t.Errorf("got %+v, want %+v", s, want)
	}
	if got := s.String(); got != "temperature 0.6, top_p 1, top_k 0, max_prompt_length 512, max_completion_length 192, max_tool_calling_iterations 2" {
		t.Errorf("String: %q", got)
	}
	if s.Iterations(4) != 2 || (&Settings{}).Iterations(4) != 4 {
		t.Error("Iterations")
	}
	if o := s.SampleOptions(7); o.Temperature != 0.6 || o.TopP != 1 || o.Seed != 7 {
		t.Errorf("SampleOptions: %+v", o)
	}
	if err := os.WriteFile(filepath.Join(dir, StateFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil {
		t.Error("a broken trainer_state.json loaded")
	}
}

// HFGenerationConfig sets Hugging Face's sampling keys and keeps the others.
func TestHFGenerationConfig(t *testing.T) {
	s := Settings{Temperature: 0, TopP: 0.9, TopK: 5, MaxCompletionLength: 64}
	raw, err := s.HFGenerationConfig(json.RawMessage(`{"eos_token_id": 3}`))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m["eos_token_id"] != 3.0 || m["do_sample"] != false || m["top_p"] != 0.9 || m["top_k"] != 5.0 || m["max_new_tokens"] != 64.0 {
		t.Errorf("%s", raw)
	}
}

// A trainer that records only some settings (SFT: the token budgets and the
// system prompt) writes them alone with JSONOf, and Load says which it has.
func TestPartialSettings(t *testing.T) {
	s := Settings{Temperature: 0.6, MaxPromptLength: 512, MaxCompletionLength: 1024, SystemPrompt: "sys"}
	raw, err := s.JSONOf("max_prompt_length", "max_completion_length", "system_prompt")
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != `{"max_completion_length":1024,"max_prompt_length":512,"system_prompt":"sys"}` {
		t.Errorf("JSONOf: %s", raw)
	}
	if raw, err := (&Settings{}).JSONOf("max_prompt_length", "system_prompt"); err != nil || string(raw) != `{"max_prompt_length":0}` {
		t.Errorf("no system prompt: %s, %v", raw, err)
	}
	if _, err := s.JSONOf("temprature"); err == nil {
		t.Error("an unknown key was written")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, StateFile), []byte(`{"global_step": 1, "generation": `+string(raw)+`}`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil || got == nil {
		t.Fatalf("%v, %v", got, err)
	}
	if got.Has("temperature") || got.Has("max_tool_calling_iterations") || !got.Has("max_prompt_length") || !got.Has("system_prompt") ||
		got.MaxCompletionLength != 1024 || got.SystemPrompt != "sys" {
		t.Errorf("loaded %+v", got)
	}
	if !(&Settings{}).Has("temperature") {
		t.Error("settings made in code lack a key")
	}
}

// Resolve: a command's defaults, then a base's settings, else the settings
// a model folder was trained with, then the flags given; a setting nobody
// recorded or gave stays the default, and the tool rounds default to
// DefaultIterations.
func TestResolve(t *testing.T) {
	def := Settings{Temperature: 1, TopP: 1, MaxCompletionLength: 512}
	s, from, err := Resolve(def, nil, "", nil)
	if err != nil || from != "" || s.String() != "temperature 1, top_p 1, top_k 0, max_prompt_length 0, max_completion_length 512, max_tool_calling_iterations 4" {
		t.Errorf("defaults: %s, %q, %v", &s, from, err)
	}
	two := 2
	base := &Settings{Temperature: 0.6, TopP: 0.9, TopK: 5, MaxPromptLength: 100, MaxCompletionLength: 64, MaxToolCallingIterations: &two, SystemPrompt: "sys"}
	if s, from, err = Resolve(def, base, "ignored", nil); err != nil || from != "" || s.String() != base.String() || s.SystemPrompt != "sys" {
		t.Errorf("base: %s, %q, %v", &s, from, err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, StateFile), []byte(`{"generation": {"max_completion_length": 192, "system_prompt": "sft"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s, from, err = Resolve(def, nil, dir, nil)
	if err != nil || from != filepath.Join(dir, StateFile) || s.Temperature != 1 || s.MaxCompletionLength != 192 || s.SystemPrompt != "sft" || s.Iterations(0) != DefaultIterations {
		t.Errorf("trained (partial): %s %q, %q, %v", &s, s.SystemPrompt, from, err)
	}
	three := 3
	flags := Given(Settings{Temperature: 0, TopP: 0.5, MaxCompletionLength: 8, MaxToolCallingIterations: &three, SystemPrompt: "mine"},
		"temperature", "max_tool_calling_iterations", "system_prompt")
	s, from, err = Resolve(def, nil, dir, flags)
	if err != nil || from == "" || s.String() != "temperature 0, top_p 1, top_k 0, max_prompt_length 0, max_completion_length 192, max_tool_calling_iterations 3" || s.SystemPrompt != "mine" {
		t.Errorf("flags over trained: %s %q, %q, %v", &s, s.SystemPrompt, from, err)
	}
	if s, _, _ = Resolve(def, base, "", flags); s.TopP != 0.9 || s.Temperature != 0 || s.Iterations(0) != 3 {
		t.Errorf("flags over base: %s", &s)
	}
	if err := os.WriteFile(filepath.Join(dir, StateFile), []byte(`{`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Resolve(def, nil, dir, nil); err == nil {
		t.Error("a broken trainer_state.json resolved")
	}
}
