package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcprl/mcprl/policy"
	"github.com/mcprl/mcprl/policy/openai"
	"github.com/mcprl/mcprl/tokenizer"
)

// Served.Open probes the server with the sampling settings and the API key of the named variable, says which
// model and server it samples, and sets ToolsAsPrompted from SendTools; a missing model name, an empty key
// variable and an unknown SendTools fail naming the flag, before any request.
func TestServedOpen(t *testing.T) {
	var got []*http.Request
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		got, bodies = append(got, r), append(bodies, body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"OK"},"finish_reason":"length"}]}`))
	}))
	t.Cleanup(srv.Close)
	tok, err := tokenizer.Small()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("MCPRL_TEST_KEY", "k3y")
	s := openai.Served{URL: srv.URL + "/v1", Model: "m", APIKeyEnv: "MCPRL_TEST_KEY", SendTools: "as-prompted", Timeout: time.Minute}
	var log bytes.Buffer
	p, err := s.Open(context.Background(), tok, nil, policy.SampleOptions{Temperature: 0.5}, &log)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Given() || !p.ToolsAsPrompted || p.Tokenizer != tok || p.Client.Model() != "m" {
		t.Errorf("given %v, tools as prompted %v, tokenizer %p, model %q", s.Given(), p.ToolsAsPrompted, p.Tokenizer, p.Client.Model())
	}
	if want := `policy: model "m" at ` + srv.URL + "/v1\n"; log.String() != want {
		t.Errorf("log %q, want %q", log.String(), want)
	}
	if len(got) != 1 || got[0].Header.Get("Authorization") != "Bearer k3y" || bodies[0]["temperature"] != 0.5 {
		t.Errorf("%d probes, authorization %q, body %v: want one with the key and temperature 0.5", len(got), got[0].Header.Get("Authorization"), bodies)
	}

	t.Setenv("MCPRL_TEST_EMPTY", "")
	for _, c := range []struct {
		s    openai.Served
		want string
	}{
		{openai.Served{URL: srv.URL}, "--policy needs --served-model"},
		{openai.Served{URL: srv.URL, Model: "m", APIKeyEnv: "MCPRL_TEST_EMPTY"}, "--api-key-env MCPRL_TEST_EMPTY: the environment variable is empty"},
		{openai.Served{URL: srv.URL, Model: "m", SendTools: "never"}, `--send-tools "never": want always or as-prompted`},
	} {
		if _, err := c.s.Open(context.Background(), tok, nil, policy.SampleOptions{}, &log); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.s, err, c.want)
		}
	}
	if len(got) != 1 {
		t.Errorf("%d requests: the bad settings reached the server", len(got))
	}
	if (&openai.Served{}).Given() {
		t.Error("no URL: given")
	}
}
