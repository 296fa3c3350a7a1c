package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/mcprl/mcprl/sampling"
)

// quickSystemPrompt is the system prompt every quick task shares.
func quickSystemPrompt(t *testing.T) string {
	t.Helper()
	first, _, _ := strings.Cut(string(must(os.ReadFile("../../examples/customers/quick_tasks.jsonl"))), "\n")
	var tk struct {
		SystemPrompt string `json:"system_prompt"`
	}
	if err := json.Unmarshal([]byte(first), &tk); err != nil || tk.SystemPrompt == "" {
		t.Fatalf("%v: %q", err, tk.SystemPrompt)
	}
	return tk.SystemPrompt
}

// trainedCopy copies the model folder dir and gives it the trainer_state.json
// that training writes with settings s: a model trained with s.
func trainedCopy(t *testing.T, dir string, s sampling.Settings) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "trained")
	if err := os.CopyFS(out, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	state := must(json.Marshal(map[string]any{"global_step": 20, "generation": s}))
	if err := os.WriteFile(filepath.Join(out, sampling.StateFile), state, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// The settings a command samples with: its defaults, then the model's
// trained ones (a nil tool-round limit keeps the default), then the flags
// given; a config's settings take the trained ones' place.
func TestSamplingFlagsResolve(t *testing.T) {
	two := 2
	trained := sampling.Settings{Temperature: 0.6, TopP: 0.9, TopK: 5, MaxPromptLength: 512, MaxCompletionLength: 192, MaxToolCallingIterations: &two, SystemPrompt: "sys"}
	dir := trainedCopy(t, t.TempDir(), trained)
	noIters := trained
	noIters.MaxToolCallingIterations = nil
	dirNoIters := trainedCopy(t, t.TempDir(), noIters)
	def := sampling.Settings{TopP: 1, MaxCompletionLength: 1024}
	for _, c := range []struct {
		name     string
		args     []string
		base     *sampling.Settings
		dir      string
		want     string
		prompt   string
		fromFile bool
	}{
		{"defaults", nil, nil, "", "temperature 0, top_p 1, top_k 0, max_prompt_length 0, max_completion_length 1024, max_tool_calling_iterations 4", "", false},
		{"untrained model", nil, nil, t.TempDir(), "temperature 0, top_p 1, top_k 0, max_prompt_length 0, max_completion_length 1024, max_tool_calling_iterations 4", "", false},
		{"trained", nil, nil, dir, "temperature 0.6, top_p 0.9, top_k 5, max_prompt_length 512, max_completion_length 192, max_tool_calling_iterations 2", "sys", true},
		{"trained, no round limit", nil, nil, dirNoIters, "temperature 0.6, top_p 0.9, top_k 5, max_prompt_length 512, max_completion_length 192, max_tool_calling_iterations 4", "sys", true},
		{"flags over trained", []string{"--temperature", "0", "--max-tool-calling-iterations", "3", "--system-prompt", "mine", "--max-completion-length", "64"}, nil, dir,
			"temperature 0, top_p 0.9, top_k 5, max_prompt_length 512, max_completion_length 64, max_tool_calling_iterations 3", "mine", true},
		{"config", []string{"--top-k", "7"}, &sampling.Settings{Temperature: 0.8, TopP: 1, MaxCompletionLength: 96}, dir,
			"temperature 0.8, top_p 1, top_k 7, max_prompt_length 0, max_completion_length 96, max_tool_calling_iterations 4", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			fl := pflag.NewFlagSet("x", pflag.ContinueOnError)
			sf := registerSampling(fl, def, 42, true)
			sf.registerSystemPrompt("")
			if err := fl.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			from, err := sf.resolve(c.base, c.dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := sf.Settings.String(); got != c.want || sf.Settings.SystemPrompt != c.prompt || (from != "") != c.fromFile {
				t.Errorf("got %q, system prompt %q, from %q; want %q, %q", got, sf.Settings.SystemPrompt, from, c.want, c.prompt)
			}
			var b bytes.Buffer
			sf.print(&b, "x", from)
			if !strings.Contains(b.String(), "x: "+c.want+"\n") {
				t.Errorf("printed %q", b.String())
			}
		})
	}
}

// chat with a trained model samples as it was trained: its token budget,
// tool rounds and system prompt (here the quick tasks', without which the
// base model does not call the tool), with --temperature over the trained
// one; it says so on stderr.
func TestChatTrainedSettings(t *testing.T) {
	sp := quickSystemPrompt(t)
	two := 2
	model := trainedCopy(t, customersBase, sampling.Settings{Temperature: 0.6, TopP: 1, MaxPromptLength: 512, MaxCompletionLength: 192,
		MaxToolCallingIterations: &two, SystemPrompt: sp})
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetArgs([]string{"chat", "--model", model, "--fixture", fixturesRoot + "/customers", "--temperature", "0"})
	root.SetIn(strings.NewReader("How many customers have the status inactive?\n"))
	root.SetOut(&out)
	root.SetErr(&errOut)
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("chat: %v\n%s", err, errOut.String())
	}
	for _, want := range []string{
		"chat: generation settings from " + filepath.Join(model, sampling.StateFile) + " (as trained; flags override)\n",
		"chat: temperature 0, top_p 1, top_k 0, max_prompt_length 512, max_completion_length 192, max_tool_calling_iterations 2\n",
		"chat: system prompt (as trained):\n" + sp + "\n",
	} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	for _, want := range []string{
		`call: query_database {"sql": "SELECT COUNT(*) FROM customers WHERE status = 'inactive'"}` + "\n",
		"answer: 7 customers are inactive.\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("transcript lacks %q:\n%s", want, out.String())
		}
	}
}

// generate --chat with a trained model renders the system prompt it was
// trained with before the user's message and samples with its settings
// (--max-new-tokens over its max_completion_length).
func TestGenerateChatTrainedSettings(t *testing.T) {
	sp := quickSystemPrompt(t)
	model := trainedCopy(t, customersBase, sampling.Settings{Temperature: 0.6, TopP: 0.95, MaxCompletionLength: 192, SystemPrompt: sp})
	out, err := runMcprl(t, "", "generate", "--model", model, "--prompt", "How many customers have the status inactive?", "--chat", "--max-new-tokens", "4")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "generate: temperature 0.6, top_p 0.95, top_k 0, max_new_tokens 4\n") {
		t.Errorf("no settings line:\n%s", out)
	}
	recs := readRecords(t, out)
	want := "<|im_start|>system\n" + sp + "<|im_end|>\n<|im_start|>user\nHow many customers have the status inactive?<|im_end|>\n<|im_start|>assistant\n"
	if len(recs) != 1 || recs[0].Prompt != want || len(recs[0].IDs) > 4 {
		t.Fatalf("records %+v, want the prompt %q", recs, want)
	}
	if _, err := runMcprl(t, "", "generate", "--model", model, "--prompt", "x", "--system-prompt", "y"); err == nil || !strings.Contains(err.Error(), "--chat") {
		t.Errorf("--system-prompt without --chat: %v", err)
	}
}

// sft records the system prompt its tasks share and its token budgets, but
// no sampling settings: chat of the model keeps its own temperature.
func TestSFTRecordsSystemPrompt(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "sft.yaml")
	if err := os.WriteFile(cfg, []byte("model: "+customersBase+"\ntasks: ../../examples/customers/quick_tasks.jsonl\nfixtures: "+fixturesRoot+
		"\nmax_steps: 1\nper_device_train_batch_size: 4\nlogging_steps: 1\nmax_prompt_length: 1024\nmax_completion_length: 512\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "sft")
	if _, stderr, err := runCmd("sft", "--config", cfg, "--output-dir", out); err != nil {
		t.Fatalf("sft: %v\n%s", err, stderr)
	}
	final := filepath.Join(out, "final")
	g, err := sampling.Load(final)
	if err != nil || g == nil || g.SystemPrompt != quickSystemPrompt(t) || g.MaxCompletionLength != 512 || g.Has("temperature") {
		t.Fatalf("recorded %+v (%v)", g, err)
	}
	fl := pflag.NewFlagSet("chat", pflag.ContinueOnError)
	sf := registerSampling(fl, sampling.Settings{TopP: 1, MaxCompletionLength: 1024}, 42, true)
	if _, err := sf.resolve(nil, final); err != nil {
		t.Fatal(err)
	}
	if got := sf.Settings.String(); got != "temperature 0, top_p 1, top_k 0, max_prompt_length 1024, max_completion_length 512, max_tool_calling_iterations 4" ||
		sf.Settings.SystemPrompt != g.SystemPrompt {
		t.Errorf("chat's settings of an SFT model: %s, system prompt %q", got, sf.Settings.SystemPrompt)
	}
}
