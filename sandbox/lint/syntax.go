package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// lineCol converts a byte offset of src into a 1-based line and column.
func lineCol(src []byte, off int64) (int, int) {
	if off > int64(len(src)) {
		off = int64(len(src))
	}
	if off < 0 {
		off = 0
	}
	before := src[:off]
	line := bytes.Count(before, []byte{'\n'}) + 1
	col := int(off) - (bytes.LastIndexByte(before, '\n') + 1)
	if col < 1 {
		col = 1
	}
	return line, col
}

// lintJSON checks that src is exactly one JSON value.
func lintJSON(rel string, src []byte) *Result {
	res := &Result{Path: rel, Linter: "json"}
	dec := json.NewDecoder(bytes.NewReader(src))
	var v any
	err := dec.Decode(&v)
	if err == nil {
		// Anything but whitespace after the value is an error.
		if tail := dec.InputOffset(); len(bytes.TrimSpace(src[tail:])) > 0 {
			off := tail + int64(len(src[tail:])-len(bytes.TrimLeft(src[tail:], " \t\r\n")))
			line, col := lineCol(src, off)
			res.Findings = append(res.Findings, Finding{Line: line, Column: col, Message: "unexpected data after the JSON value"})
		}
	} else {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			// The offset points just past the offending byte.
			line, col := lineCol(src, max(syn.Offset-1, 0))
			res.Findings = append(res.Findings, Finding{Line: line, Column: col, Message: syn.Error()})
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			line, col := lineCol(src, int64(len(src)))
			msg := "unexpected end of JSON input"
			if len(bytes.TrimSpace(src)) == 0 {
				msg = "empty file: no JSON value"
			}
			res.Findings = append(res.Findings, Finding{Line: line, Column: col, Message: msg})
		case errors.As(err, &typ):
			line, col := lineCol(src, typ.Offset)
			res.Findings = append(res.Findings, Finding{Line: line, Column: col, Message: typ.Error()})
		default:
			res.Findings = append(res.Findings, Finding{Line: 1, Message: err.Error()})
		}
	}
	if len(res.Findings) > 0 {
		res.ExitCode = 1
	}
	return res
}

var yamlLine = regexp.MustCompile(`line (\d+): `)

// lintYAML checks that every document of src parses.
func lintYAML(rel string, src []byte) *Result {
	res := &Result{Path: rel, Linter: "yaml"}
	err := parseYAML(src)
	if err == nil {
		return res
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		for _, m := range te.Errors {
			res.Findings = append(res.Findings, yamlFinding(m))
		}
	} else {
		f := yamlFinding(err.Error())
		f.Line = problemLine(src, f.Line)
		res.Findings = append(res.Findings, f)
	}
	res.ExitCode = 1
	return res
}

// parseYAML decodes every document of src; decoding into values (not
// nodes) also reports duplicate keys.
func parseYAML(src []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// problemLine narrows a syntax error's line. yaml.v3 reports the line where
// the enclosing block or flow collection starts, which may be well above the
// offending line; the first prefix of src, from that line on, that no
// longer parses ends at the offending line.
func problemLine(src []byte, reported int) int {
	lines := bytes.SplitAfter(src, []byte("\n"))
	if len(lines) > 2000 || reported < 1 {
		return reported
	}
	end := 0
	for k := 1; k <= len(lines); k++ {
		end += len(lines[k-1])
		if k < reported {
			continue
		}
		if parseYAML(src[:end]) != nil {
			return k
		}
	}
	return reported
}

func yamlFinding(msg string) Finding {
	msg = strings.TrimPrefix(msg, "yaml: ")
	line := 1
	if m := yamlLine.FindStringSubmatchIndex(msg); m != nil {
		line, _ = strconv.Atoi(msg[m[2]:m[3]])
		msg = msg[:m[0]] + msg[m[1]:]
	}
	return Finding{Line: line, Message: msg}
}
