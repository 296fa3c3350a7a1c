package pycompat

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"
)

func python3(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is not on PATH: pycompat's parity test needs it under CI")
		}
		t.Skip("python3 is not on PATH")
	}
	return p
}

// TestParityWithCPython compares Lower, Strip and Loads's outcome with the
// running CPython on 3,000+ random strings rich in special cases.
func TestParityWithCPython(t *testing.T) {
	py := python3(t)
	out, err := exec.Command(py, "testdata/cases.py", "7").Output()
	if err != nil {
		t.Fatalf("cases.py: %v", err)
	}
	ver, err := exec.Command(py, "-c", "import sys, unicodedata; print(sys.version.split()[0][:4], unicodedata.unidata_version)").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(ver), PythonVersion[:4]) {
		t.Logf("tables are from Python %s (Unicode %s); python3 here is %s", PythonVersion, UnicodeVersion, ver)
	}
	n := 0
	for i, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		c, err := Loads(line)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		get := func(k string) string {
			v, ok := c.Get(k)
			if !ok || v.Kind != StrKind {
				t.Fatalf("line %d: no %s", i+1, k)
			}
			return v.Str
		}
		s := get("s")
		if got, want := Lower(s), get("lower"); got != want {
			t.Errorf("Lower(%+q) = %+q, want %+q", s, got, want)
		}
		if got, want := Strip(s), get("strip"); got != want {
			t.Errorf("Strip(%+q) = %+q, want %+q", s, got, want)
		}
		want := get("loads")
		// cases.py calls json.loads one Python frame shallower than the
		// seed harness calls it from compute_mcp_reward: one level more.
		v, err := LoadsDepth(s, DefaultMaxDepth+1)
		got := ""
		if err != nil {
			got = string(err.(*Error).Class)
		} else {
			got = v.Kind.TypeName()
		}
		if got != want {
			t.Errorf("Loads(%.80q): %s, want %s", s, got, want)
		}
		n++
	}
	t.Logf("%d strings agree with CPython", n)
}

func TestLoadsValues(t *testing.T) {
	v, err := Loads(` {"name": "a", "arguments": {"sql": "x\ud800y\ud83d\ude00"}, "name": "query\u005fdatabase"} `)
	if err != nil {
		t.Fatal(err)
	}
	name, _ := v.Get("name")
	if name.Str != "query_database" {
		t.Errorf("last duplicate key should win, got %q", name.Str)
	}
	args, _ := v.Get("arguments")
	sql, _ := args.Get("sql")
	if sql.Str != "x\xed\xa0\x80y\U0001F600" {
		t.Errorf("sql = %+q", sql.Str)
	}
	if utf8.ValidString(sql.Str) {
		t.Error("a lone surrogate must stay distinguishable (WTF-8), not become valid UTF-8")
	}
	for _, s := range []string{"NaN", "-Infinity", "[1e999]", "-0", "\"\x7f\""} {
		if _, err := Loads(s); err != nil {
			t.Errorf("Loads(%q): %v", s, err)
		}
	}
	for s, class := range map[string]ErrorClass{
		"\ufeff{}": JSONDecodeError, "{\"a\":1,}": JSONDecodeError, "\"\t\"": JSONDecodeError, "1 2": JSONDecodeError,
		strings.Repeat("9", 4301): ValueError, strings.Repeat("[", 994) + strings.Repeat("]", 994): RecursionError,
		strings.Repeat("[", 994): RecursionError,
	} {
		_, err := Loads(s)
		if e, ok := err.(*Error); !ok || e.Class != class {
			t.Errorf("Loads(%.20q...) = %v, want %s", s, err, class)
		}
	}
}

func FuzzLoads(f *testing.F) {
	f.Add(`{"a": [1, NaN, "\ud800"]}`)
	f.Add(`[[[[`)
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = Loads(s)
		_ = Lower(s)
		st := Strip(s)
		if len(st) > len(s) || !strings.Contains(s, st) {
			t.Fatalf("Strip(%q) = %q", s, st)
		}
	})
}

// viewOf derives the CallView from a fully built value.
func viewOf(v Value, key string) CallView {
	cv := CallView{Kind: v.Kind}
	if v.Kind != DictKind {
		return cv
	}
	if n, ok := v.Get("name"); ok {
		cv.Name = Field{true, n.Kind, ""}
		if n.Kind == StrKind {
			cv.Name.Str = n.Str
		}
	}
	if a, ok := v.Get("arguments"); ok {
		cv.Args = Field{Present: true, Kind: a.Kind}
		if x, ok := a.Get(key); ok {
			cv.Arg = Field{true, x.Kind, ""}
			if x.Kind == StrKind {
				cv.Arg.Str = x.Str
			}
		}
	}
	return cv
}

func checkCallView(t *testing.T, s string, depth int) {
	v, err := LoadsDepth(s, depth)
	cv, cerr := LoadsCall(s, "sql", depth)
	if (err == nil) != (cerr == nil) {
		t.Fatalf("%.80q: Loads %v, LoadsCall %v", s, err, cerr)
	}
	if err != nil {
		if err.(*Error).Class != cerr.(*Error).Class {
			t.Fatalf("%.80q: Loads %v, LoadsCall %v", s, err, cerr)
		}
		return
	}
	if want := viewOf(v, "sql"); cv != want {
		t.Fatalf("%.80q: LoadsCall %+v, Loads gives %+v", s, cv, want)
	}
}

func TestLoadsCallMatchesLoads(t *testing.T) {
	for _, s := range []string{`{"name": "a", "arguments": {"sql": "x", "sql": 1}, "arguments": {"sql": "y\u0041"}}`,
		`{"arguments": [], "name": 3}`, `[{"name": "q"}]`, `{"name": "q", "arguments": {"a": [[[]]]}}`, `{"n\u0061me": "q"}`,
		`{"name": "q", "arguments": {"sql": "x"}, "arguments": null}`, `{"name": "q"} x`, strings.Repeat("[", 3) + strings.Repeat("]", 3)} {
		for depth := 1; depth < 5; depth++ {
			checkCallView(t, s, depth)
		}
	}
}

// FuzzLoadsCall: the reduced reader accepts, rejects and reads exactly
// what the full decoder does.
func FuzzLoadsCall(f *testing.F) {
	f.Add(`{"name": "query_database", "arguments": {"sql": "inactive"}}`, 3)
	f.Add(`{"name": [1, {"a": "\ud800"}], "arguments": {"sql": ["x"], "sql": "y"}}`, 2)
	f.Fuzz(func(t *testing.T, s string, depth int) {
		checkCallView(t, s, 1+(depth&7))
	})
}
