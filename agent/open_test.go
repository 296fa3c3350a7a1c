package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/agent"
	"github.com/mcprl/mcprl/toolcall"
)

// Open starts a fixture's sandbox with the given system prompt, or with catalog the fixture's tool catalog;
// Intro names the fixture and its tools, ShowSystemPrompt the prompt and where it came from; a directory that is
// no fixture fails.
func TestOpen(t *testing.T) {
	ctx := context.Background()
	a, err := agent.Open(ctx, "../examples/fixtures/customers", "", false, "Be brief.")
	if err != nil {
		t.Fatal(err)
	}
	var intro strings.Builder
	a.Intro(&intro, "chat")
	if a.SystemPrompt != "Be brief." || intro.String() != "chat: fixture customers, tools query_database, run_linter; one question a line, exit to stop\n" {
		t.Errorf("system prompt %q, intro %q", a.SystemPrompt, intro.String())
	}
	var shown strings.Builder
	a.ShowSystemPrompt(&shown, "chat", true)
	a.ShowSystemPrompt(&shown, "chat", false)
	if want := "chat: system prompt (as trained):\nBe brief.\nchat: system prompt:\nBe brief.\n"; shown.String() != want {
		t.Errorf("system prompt shown as %q, want %q", shown.String(), want)
	}
	catalog := toolcall.RenderCatalog(a.Sandbox.Tools())
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if a, err = agent.Open(ctx, "../examples/fixtures/customers", "", true, "Be brief."); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.SystemPrompt != catalog || !strings.Contains(catalog, "query_database") {
		t.Errorf("with catalog: system prompt %q, want %q", a.SystemPrompt, catalog)
	}
	if _, err := agent.Open(ctx, t.TempDir(), "", false, ""); err == nil {
		t.Error("opened an empty directory")
	}
}
