package toolcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcprl/mcprl/chat"
)

// The tags around one call, as Qwen2.5/Qwen3 and Hermes chat templates write them.
const (
	OpenTag  = "<tool_call>"
	CloseTag = "</tool_call>"
)

// ErrorKind classifies why a call could not be parsed.
type ErrorKind string

// The kinds of ParseError.
const (
	ErrBadJSON      ErrorKind = "bad_json"      // the text between the tags is not one JSON value
	ErrNotObject    ErrorKind = "not_object"    // the JSON is valid but not an object
	ErrMissingName  ErrorKind = "missing_name"  // no "name", or it is not a non-empty string
	ErrArguments    ErrorKind = "bad_arguments" // "arguments" is present but not an object
	ErrUnterminated ErrorKind = "unterminated"  // <tool_call> without its </tool_call>
	ErrUnknownTool  ErrorKind = "unknown_tool"  // the name is not in the catalog
)

// ParseError says why one tool call could not be used. Its message is
// written for the model: a rollout shows it as the call's observation.
type ParseError struct {
	Kind   ErrorKind
	Offset int // byte offset of the call's opening tag in the text
	Msg    string
}

func (e *ParseError) Error() string { return e.Msg }

// Parsed is one <tool_call> block found in a text: the call when it is
// well-formed, otherwise Err. Raw is the text between the tags (to the end
// of the text when unterminated); Start and End delimit the whole block,
// tags included.
type Parsed struct {
	Call       chat.Call
	Raw        string
	Start, End int
	Err        *ParseError
}

// Parse finds every <tool_call>...</tool_call> block in text, in order, and
// decodes each as {"name": string, "arguments": object}. An absent
// "arguments" means {}. It never panics: each malformed block is returned
// with Err set. An opening tag met again before the closing tag ends the
// first block as unterminated; an opening tag with no closing tag anywhere
// after it is one unterminated block to the end of the text, and the search
// stops there. Parse reads text once: its time is linear in len(text) plus
// the JSON decoding of each block's body.
func Parse(text string) []Parsed {
	var out []Parsed
	scan(text, func(start, body, bodyEnd, end int, closed bool) {
		p := Parsed{Raw: text[body:bodyEnd], Start: start, End: end}
		if closed {
			p.Call, p.Err = decode(p.Raw, start)
		} else {
			p.Err = &ParseError{Kind: ErrUnterminated, Offset: start,
				Msg: "tool call is not terminated: " + OpenTag + " must be closed by " + CloseTag}
		}
		out = append(out, p)
	})
	return out
}

// index is strings.Index; a test counts the bytes it is given to hold scan
// to linear time.
var index = strings.Index

// scan calls visit for each block of text in order: start and end delimit
// the whole block (tags included), body and bodyEnd the text between the
// tags; closed says whether its closing tag was found. Every byte of text is
// searched a bounded number of times: the position of the next closing tag
// is remembered (and known absent once a search fails), and the search for
// a reopening tag stops at that closing tag.
func scan(text string, visit func(start, body, bodyEnd, end int, closed bool)) {
	pos := 0
	nextClose := -2 // the first closing tag at or after the current body; -1: none left; -2: not searched yet
	for {
		i := index(text[pos:], OpenTag)
		if i < 0 {
			return
		}
		start := pos + i
		body := start + len(OpenTag)
		if nextClose != -1 && nextClose < body {
			nextClose = index(text[body:], CloseTag)
			if nextClose >= 0 {
				nextClose += body
			}
		}
		if nextClose < 0 {
			visit(start, body, len(text), len(text), false)
			return
		}
		if k := index(text[body:nextClose], OpenTag); k >= 0 {
			visit(start, body, body+k, body+k, false)
			pos = body + k
			continue
		}
		end := nextClose + len(CloseTag)
		visit(start, body, nextClose, end, true)
		pos = end
	}
}

// ParseKnown is Parse followed by a check of every well-formed call's name
// against the catalog: a name not in it becomes an ErrUnknownTool error.
func ParseKnown(text string, catalog []string) []Parsed {
	ps := Parse(text)
	for i := range ps {
		p := &ps[i]
		if p.Err != nil {
			continue
		}
		known := false
		for _, name := range catalog {
			if name == p.Call.Name {
				known = true
				break
			}
		}
		if !known {
			p.Err = &ParseError{Kind: ErrUnknownTool, Offset: p.Start,
				Msg: fmt.Sprintf("unknown tool %q: available tools are %s", p.Call.Name, strings.Join(catalog, ", "))}
		}
	}
	return ps
}

func decode(raw string, offset int) (chat.Call, *ParseError) {
	bad := func(kind ErrorKind, format string, a ...any) (chat.Call, *ParseError) {
		return chat.Call{}, &ParseError{Kind: kind, Offset: offset, Msg: fmt.Sprintf(format, a...)}
	}
	trimmed := strings.TrimSpace(raw)
	var probe any
	if err := json.Unmarshal([]byte(trimmed), &probe); err != nil {
		return bad(ErrBadJSON, "tool call is not valid JSON: %v", err)
	}
	if _, ok := probe.(map[string]any); !ok {
		return bad(ErrNotObject, "tool call must be a JSON object {\"name\": ..., \"arguments\": {...}}")
	}
	var fields struct {
		Name      json.RawMessage `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal([]byte(trimmed), &fields); err != nil {
		return bad(ErrBadJSON, "tool call is not valid JSON: %v", err)
	}
	var name string
	if len(fields.Name) == 0 || json.Unmarshal(fields.Name, &name) != nil || name == "" {
		return bad(ErrMissingName, "tool call needs a \"name\" that is a non-empty string")
	}
	args := bytes.TrimSpace(fields.Arguments)
	switch {
	case len(args) == 0:
		args = []byte("{}")
	case args[0] != '{':
		return bad(ErrArguments, "tool call %q: \"arguments\" must be a JSON object", name)
	}
	return chat.Call{Name: name, Arguments: json.RawMessage(args)}, nil
}

// StripCalls returns text with every tool-call block removed and the rest
// trimmed: what the agent said around its calls. It finds the blocks as
// Parse does, in one linear scan, without decoding them.
func StripCalls(text string) string {
	var b strings.Builder
	pos := 0
	scan(text, func(start, _, _, end int, _ bool) {
		b.WriteString(text[pos:start])
		pos = end
	})
	if pos == 0 {
		return strings.TrimSpace(text)
	}
	b.WriteString(text[pos:])
	return strings.TrimSpace(b.String())
}
