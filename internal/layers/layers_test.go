package layers

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const (
	module = "github.com/mcprl/mcprl/"
	gomlx  = "github.com/gomlx/"
	mcpSDK = "github.com/modelcontextprotocol/"
)

// forbidden lists, for each package, the import path prefixes it must not
// depend on, directly or through any other package.
var forbidden = map[string][]string{
	"chat":          {gomlx, mcpSDK},
	"policy":        {gomlx, mcpSDK},
	"policy/openai": {gomlx},
	"task":          {gomlx, mcpSDK},
	"sampling":      {gomlx, mcpSDK},
	"tokenizer":     {gomlx, mcpSDK, module + "gguf"},
	"taskgen":       {gomlx},
	"look":          {gomlx, mcpSDK},
	"toolcall":      {gomlx},
	"reward":        {gomlx},
	"rollout":       {gomlx},
	"sandbox":       {gomlx},
	"envserver":     {gomlx},
	"report":        {gomlx, mcpSDK},
	"gguf":          {gomlx, mcpSDK},
	"gguf/convert":  {mcpSDK},
	// GGUF import and export live in gguf/convert alone (TestGGUFConversionHasOneHome): the model and the
	// tokenizer know nothing of GGUF.
	"model": {module + "gguf"},
}

// TestLayers runs `go list -deps` on each package and fails, naming the
// chain of imports, when it reaches a forbidden one.
func TestLayers(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	for pkg, bans := range forbidden {
		t.Run(pkg, func(t *testing.T) {
			imports := importGraph(t, module+pkg)
			for _, ban := range bans {
				if path := reach(imports, module+pkg, ban); path != nil {
					t.Errorf("%s depends on %s*: %s", pkg, ban, strings.Join(path, " -> "))
				}
			}
		})
	}
}

// importGraph returns the direct imports of pkg and of each of its
// dependencies, as `go list -deps` reports them.
func importGraph(t *testing.T, pkg string) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, pkg).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	g := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		g[f[0]] = f[1:]
	}
	if _, ok := g[pkg]; !ok {
		t.Fatalf("go list -deps %s did not list the package itself", pkg)
	}
	return g
}

// reach returns a chain of imports from "from" to the first package whose
// path starts with prefix, or nil when there is none.
func reach(g map[string][]string, from, prefix string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if strings.HasPrefix(p, prefix) {
			var path []string
			for q := p; q != ""; q = prev[q] {
				path = append([]string{q}, path...)
			}
			return path
		}
		for _, q := range g[p] {
			if _, seen := prev[q]; !seen {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return nil
}

// TestGGUFConversionHasOneHome: the functions that convert between GGUF and Hugging Face model directories
// (ImportGGUF, ExportGGUF, ConfigFromGGUF, the tokenizer's TokenizerFiles and TokenizerMetadata, once
// model.ImportGGUF, tokenizer.GGUFFiles and Tokenizer.GGUFMetadata) are declared in package gguf/convert only, and
// neither model nor tokenizer imports gguf (TestLayers).
func TestGGUFConversionHasOneHome(t *testing.T) {
	decl := regexp.MustCompile(`(?m)^func (\([^)]*\) )?(ImportGGUF|ExportGGUF|ConfigFromGGUF|GGUFFiles|WriteGGUF|GGUFMetadata|GGUFPre|TokenizerFiles|TokenizerMetadata)\(`)
	homes := map[string]bool{}
	for _, f := range goFiles(t) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range decl.FindAllSubmatch(b, -1) {
			homes[string(m[2])] = true
			if path.Dir(f) != "gguf/convert" {
				t.Errorf("%s declares %s: GGUF conversion belongs in gguf/convert", f, m[2])
			}
		}
	}
	for _, name := range []string{"ImportGGUF", "ExportGGUF", "TokenizerFiles", "TokenizerMetadata"} {
		if !homes[name] {
			t.Errorf("no declaration of %s found: the scan is missing it", name)
		}
	}
	for _, pkg := range []string{"model", "tokenizer"} {
		if !slices.Contains(forbidden[pkg], module+"gguf") {
			t.Errorf("TestLayers does not keep %s from importing gguf", pkg)
		}
	}
}

// TestOneTokenIDConversion: token ids are the tokenizer's []int everywhere, in the tokenizer, the model's session,
// the policies, the rollout, chat.Trajectory.Tokens and rollout.Script, and the trainers that read them; the
// tensor engine's int32 is made where ids enter a tensor (model.PadBatch, the session's feed). A function that
// converts a slice of one integer type to another (model, rollout and policy/openai each had a toInt or toInt32
// of their own, and rollout/ids.go converted to the int32 that trajectories held) fails.
func TestOneTokenIDConversion(t *testing.T) {
	conv := regexp.MustCompile(`(?m)^func (?:\([^)]*\) )?(\w+)\(\w+ \[\](u?int(?:8|16|32|64)?)\) \[\](u?int(?:8|16|32|64)?) \{`)
	if m := conv.FindStringSubmatch("func TrajectoryIDs(ids []int) []int32 {\n"); m == nil || m[1] != "TrajectoryIDs" {
		t.Fatalf("the scan misses a conversion: %q", m)
	}
	for _, f := range goFiles(t) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range conv.FindAllSubmatch(b, -1) {
			if string(m[2]) != string(m[3]) {
				t.Errorf("%s: func %s converts []%s to []%s: token ids have one type, []int, converted to int32 where they enter a tensor (model.PadBatch)",
					f, m[1], m[2], m[3])
			}
		}
	}
}

// goFiles lists the non-test Go files of the module's packages, as `go list` reports them (every build
// constraint's: ignored files included), by path relative to the repository root.
func goFiles(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}
{{end}}{{range .CgoFiles}}{{$d}}/{{.}}
{{end}}{{range .IgnoredGoFiles}}{{$d}}/{{.}}
{{end}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	wd, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range strings.Fields(string(out)) {
		r, err := filepath.Rel(wd, f)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(r))
	}
	if len(files) < 50 {
		t.Fatalf("go list found %d Go files", len(files))
	}
	return files
}

// TestReachFindsTheChain: the search names the chain through which a
// forbidden package is reached (the test above can fail).
func TestReachFindsTheChain(t *testing.T) {
	g := map[string][]string{
		"a": {"b", "c"},
		"b": {"fmt"},
		"c": {"d"},
		"d": {gomlx + "gomlx/backends"},
	}
	got := strings.Join(reach(g, "a", gomlx), " ")
	if want := "a c d " + gomlx + "gomlx/backends"; got != want {
		t.Errorf("reach = %q, want %q", got, want)
	}
	if p := reach(g, "b", gomlx); p != nil {
		t.Errorf("reach from b = %v, want none", p)
	}
}
