package tokenizer

import (
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/mcprl/mcprl/chat"
)

func convert(t *testing.T, tok *Tokenizer, in string, decode bool) ([]string, error) {
	t.Helper()
	var out strings.Builder
	err := tok.ConvertJSONL(strings.NewReader(in), "stdin", &out, decode)
	if out.Len() == 0 {
		return nil, err
	}
	return strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"), err
}

// Text lines in, ids out in order, equal to Encode (blank lines skipped);
// decoding them gives the texts back; a bad line is named.
func TestConvertJSONLEncodeDecode(t *testing.T) {
	tok := qwen(t)
	texts := []string{"<|im_start|>user\nHow many singers are older than 30?<|im_end|>", "", "naïve café 日本語 😀", "SELECT *\n  FROM t;\n\n"}
	var in strings.Builder
	for _, s := range texts {
		b, _ := json.Marshal(map[string]string{"text": s})
		in.Write(b)
		in.WriteString("\n\n") // blank lines are skipped
	}
	lines, err := convert(t, tok, in.String(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != len(texts) {
		t.Fatalf("%d output lines for %d inputs: %q", len(lines), len(texts), lines)
	}
	for i, l := range lines {
		var rec struct{ IDs []int }
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("line %d %q: %v", i+1, l, err)
		}
		if want := tok.Encode(texts[i]); !slices.Equal(rec.IDs, want) && !(len(want) == 0 && len(rec.IDs) == 0) {
			t.Errorf("line %d: ids %v, want %v", i+1, rec.IDs, want)
		}
	}
	if lines[1] != `{"ids":[]}` {
		t.Errorf("empty text: %s, want an empty list", lines[1])
	}
	decoded, err := convert(t, tok, strings.Join(lines, "\n"), true)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range decoded {
		var rec struct{ Text string }
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("decode line %d %q: %v", i+1, l, err)
		}
		if rec.Text != texts[i] {
			t.Errorf("decode line %d: %q, want %q", i+1, rec.Text, texts[i])
		}
	}
	for _, c := range []struct {
		in     string
		decode bool
		want   string
	}{
		{"{\"text\": \"ok\"}\n{\"txt\": 1}\n", false, `stdin line 2: no "text" field`},
		{"{\"ids\": [1]}\n\n{\"text\": \"a\"}\n", true, `stdin line 3: no "ids" field`},
		{"{\"text\": \"ok\"}\n{not json\n", false, "stdin line 2: invalid character"},
	} {
		if _, err := convert(t, tok, c.in, c.decode); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.in, err, c.want)
		}
	}
}

// A {"messages", "tools"} line gives the chat template's rendering and its
// ids; a bad message is an error naming the input line.
func TestConvertJSONLChat(t *testing.T) {
	tok := qwen(t)
	tmpl, err := tok.Template()
	if err != nil {
		t.Fatal(err)
	}
	line := `{"messages": [{"role": "user", "content": "count"}, {"role": "assistant", "content": "", "tool_calls": [{"name": "query_database", "arguments": {"sql": "SELECT 1"}}]}, {"role": "tool", "name": "query_database", "content": "1"}], "tools": [{"type": "function", "function": {"name": "query_database"}}], "add_generation_prompt": true}`
	lines, err := convert(t, tok, line+"\n", false)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Text string `json:"text"`
		IDs  []int  `json:"ids"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatalf("%v: %s", err, lines[0])
	}
	var in struct {
		Messages []chat.Message    `json:"messages"`
		Tools    []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal([]byte(line), &in); err != nil {
		t.Fatal(err)
	}
	want, err := tmpl.Render(in.Messages, in.Tools, true)
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != want || !strings.HasSuffix(got.Text, "<|im_start|>assistant\n") {
		t.Errorf("text %q, want %q", got.Text, want)
	}
	if !slices.Equal(got.IDs, tok.Encode(want)) {
		t.Errorf("ids %v, want %v", got.IDs, tok.Encode(want))
	}
	if _, err := convert(t, tok, "{\"text\": \"a\"}\n{\"messages\": [{\"role\": 3}]}\n", false); err == nil || !strings.Contains(err.Error(), "stdin line 2") {
		t.Errorf("bad message: error %v, want one naming line 2", err)
	}
}

// Each answer is flushed as soon as no further input is waiting, so a
// process that writes a line and waits for its answer is not stuck.
func TestConvertJSONLAnswersEachLine(t *testing.T) {
	tok := qwen(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- tok.ConvertJSONL(inR, "pipe", outW, false); outW.Close() }()
	buf := make([]byte, 256)
	for _, text := range []string{"a", "b"} {
		if _, err := io.WriteString(inW, `{"text": "`+text+`"}`+"\n"); err != nil {
			t.Fatal(err)
		}
		n, err := outR.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := json.Marshal(map[string][]int{"ids": tok.Encode(text)}); strings.TrimSpace(string(buf[:n])) != string(want) {
			t.Errorf("answer %q, want %s", buf[:n], want)
		}
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Error(err)
	}
}
