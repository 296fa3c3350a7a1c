package train

import "testing"

// Over keeps a config's key where the flag is not given and takes the
// flag's value where it is.
func TestInputsOver(t *testing.T) {
	cfg := Inputs{Model: "m", Tasks: "t.jsonl", Fixtures: "fx", DSN: "postgres://a", Engine: "xla"}
	if got := cfg.Over(Inputs{}); got != cfg {
		t.Errorf("no flags: %+v", got)
	}
	want := Inputs{Model: "m2", Tasks: "t.jsonl", Fixtures: "fx2", DSN: "postgres://a", Engine: "simplego"}
	if got := cfg.Over(Inputs{Model: "m2", Fixtures: "fx2", Engine: "simplego"}); got != want {
		t.Errorf("flags: %+v, want %+v", got, want)
	}
}
