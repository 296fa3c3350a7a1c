package task

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mcprl/mcprl/chat"
)

// WriteJSONL writes tasks as JSONL, the format Load reads: what
// encoding/json writes (without HTML escaping), except that every golden
// call's arguments keep their bytes. encoding/json would compact them, and
// sft renders a call with its arguments' bytes, so a model trained on a
// distilled golden learns the text its teacher wrote.
func WriteJSONL(w io.Writer, tasks []Task) error {
	for i := range tasks {
		t := tasks[i]
		golden, category := t.Golden, t.Category
		t.Golden, t.Category = nil, "" // written after the others, in the struct's order
		head, err := marshal(&t)
		if err != nil {
			return fmt.Errorf("task %q: %w", t.ID, err)
		}
		var b bytes.Buffer
		b.Write(head[:len(head)-1]) // without the closing brace
		if len(golden) > 0 {
			b.WriteString(`,"golden":[`)
			for k, m := range golden {
				if k > 0 {
					b.WriteByte(',')
				}
				if err := writeMessage(&b, m); err != nil {
					return fmt.Errorf("task %q: golden[%d]: %w", t.ID, k, err)
				}
			}
			b.WriteByte(']')
		}
		if category != "" {
			c, err := marshal(category)
			if err != nil {
				return fmt.Errorf("task %q: %w", t.ID, err)
			}
			b.WriteString(`,"category":`)
			b.Write(c)
		}
		b.WriteString("}\n")
		if _, err := w.Write(b.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes tasks to path (its directory created) with WriteJSONL.
func WriteFile(path string, tasks []Task) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if err := WriteJSONL(w, tasks); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeMessage writes m as encoding/json would, but with each call's
// arguments as their own bytes.
func writeMessage(b *bytes.Buffer, m chat.Message) error {
	calls := m.ToolCalls
	m.ToolCalls = nil
	head, err := marshal(&m)
	if err != nil {
		return err
	}
	b.Write(head[:len(head)-1])
	if len(calls) > 0 {
		b.WriteString(`,"tool_calls":[`)
		for k, c := range calls {
			if !json.Valid(c.Arguments) {
				return fmt.Errorf("call %d: arguments are not JSON", k)
			}
			name, err := marshal(c.Name)
			if err != nil {
				return err
			}
			if k > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"name":`)
			b.Write(name)
			b.WriteString(`,"arguments":`)
			b.Write(bytes.TrimSpace(c.Arguments))
			b.WriteByte('}')
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
	return nil
}

// marshal is json.Marshal without HTML escaping (and its newline).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
