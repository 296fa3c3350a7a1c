package layers

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root, from this package's folder.
const root = "../.."

// TestArchitectureNamesEveryPackage: docs/architecture.md names every package of the module (as `path`, relative
// to the module), so that a new package is placed in a layer when it is added.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages: %v", len(pkgs), pkgs)
	}
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p, module)
		if !strings.Contains(string(doc), "`"+rel+"`") {
			t.Errorf("docs/architecture.md does not name package `%s`", rel)
		}
	}
}

// TestDocsLinks: every relative link in README.md and docs/*.md (images included) names a file that exists, and
// an anchor (#...) names a heading of the Markdown file it points into, as GitHub makes anchors.
func TestDocsLinks(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	checked := 0
	for _, f := range files {
		for _, l := range markdownLinks(t, f) {
			target, anchor, _ := strings.Cut(l.target, "#")
			path := f
			if target != "" {
				path = filepath.Join(filepath.Dir(f), filepath.FromSlash(target))
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", rel(f), l.line, l.target, rel(path))
					continue
				}
			}
			checked++
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(path, ".md") {
				t.Errorf("%s:%d: link %q: an anchor into a file that is not Markdown", rel(f), l.line, l.target)
				continue
			}
			if !headingAnchors(t, path)[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", rel(f), l.line, l.target, rel(path), anchor)
			}
		}
	}
	t.Logf("%d relative links in %d files", checked, len(files))
	if checked < 10 {
		t.Errorf("only %d relative links found: the parser is missing them", checked)
	}
}

func rel(path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(r)
}

type link struct {
	target string
	line   int
}

// linkRE matches an inline Markdown link or image: [text](target) or [text](target "title").
var linkRE = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// markdownLinks returns the relative links of a Markdown file: not in fenced code blocks or inline code, not
// absolute URLs (scheme:) or site-absolute paths.
func markdownLinks(t *testing.T, path string) []link {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var links []link
	fenced := false
	for i, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatchIndex(withoutInlineCode(line), -1) {
			target := line[m[2]:m[3]]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "/") {
				continue
			}
			links = append(links, link{target: target, line: i + 1})
		}
	}
	return links
}

// withoutInlineCode blanks the `code` spans of a line, keeping its length (so indices still fit the line).
func withoutInlineCode(line string) string {
	b := []byte(line)
	in := false
	for i, c := range b {
		if c == '`' {
			in = !in
			continue
		}
		if in {
			b[i] = ' '
		}
	}
	return string(b)
}

// headingAnchors returns the anchors GitHub gives a Markdown file's headings: lower case, punctuation other than
// '-' and '_' removed, spaces made '-', and a repeated anchor numbered -1, -2, ...
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}
