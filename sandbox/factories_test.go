package sandbox

import (
	"context"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/task"
)

// Start builds each named fixture's factory once, returns them by name, and
// fails on a fixture it does not have; Get returns the same factories.
func TestFactoriesStart(t *testing.T) {
	fx := loadCustomers(t)
	fs := NewFactories(map[string]*task.Fixture{fx.Name: fx}, Options{})
	defer fs.Close()
	ctx := context.Background()
	got, err := fs.Start(ctx, []string{fx.Name, fx.Name})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[fx.Name] == nil {
		t.Fatalf("Start: %v, want the one factory of %s", got, fx.Name)
	}
	again, err := fs.Get(ctx, fx.Name)
	if err != nil || again != got[fx.Name] {
		t.Errorf("Get after Start: %p, %v; want the started factory %p", again, err, got[fx.Name])
	}
	if names := toolNames(got[fx.Name]); !strings.Contains(names, "query_database") {
		t.Errorf("tools %s, want query_database among them", names)
	}
	if _, err := fs.Start(ctx, []string{fx.Name, "nowhere"}); err == nil || !strings.Contains(err.Error(), `fixture "nowhere" not found`) {
		t.Errorf("Start of an unknown fixture: %v", err)
	}
}

func toolNames(f *Factory) string {
	var names []string
	for _, tl := range f.Tools() {
		names = append(names, tl.Name)
	}
	return strings.Join(names, ",")
}
