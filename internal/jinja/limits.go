package jinja

// mcprl: limits on what one render may compute. A chat template comes with a
// model's files; upstream renders whatever it says, so that
// {% for x in range(10000000000) %} exhausts memory, a macro that calls
// itself overflows the stack (a fatal error, not a panic) and a string
// doubled in a loop grows without bound. transformers renders in Jinja2's
// sandbox, whose range stops at MAX_RANGE (100,000). These limits hold in
// every render; going past one is an error (*LimitError) naming it.

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// The limits of a render.
const (
	// MaxRange is the most items range() gives (Jinja2's sandbox MAX_RANGE).
	MaxRange = 100_000
	// MaxBytes bounds any one string a template builds, and the output it
	// writes in all (macro and block bodies included).
	MaxBytes = 32 << 20
	// MaxItems bounds any one list a template builds.
	MaxItems = 1 << 20
	// MaxDepth bounds nested macro and caller() calls, and the nesting of a
	// value printed or encoded (a list that holds itself is refused there).
	MaxDepth = 200
)

// DefaultTimeout bounds the time of a render through Render or
// RenderValues; RenderValuesWithin takes another.
const DefaultTimeout = 10 * time.Second

// LimitError is a render stopped at one of the limits.
type LimitError struct{ Msg string }

func (e *LimitError) Error() string { return "jinja: " + e.Msg }

// exceed stops the render with a LimitError (render recovers it).
func exceed(format string, args ...any) {
	panic(&LimitError{Msg: fmt.Sprintf(format, args...)})
}

// checkBytes stops the render when a string of n bytes would pass MaxBytes.
func checkBytes(n int, what string) {
	if n > MaxBytes || n < 0 {
		exceed("%s of more than %d bytes (the template's limit)", what, MaxBytes)
	}
}

// checkItems stops the render when a list of n items would pass MaxItems.
func checkItems(n int, what string) {
	if n > MaxItems || n < 0 {
		exceed("%s of more than %d items (the template's limit)", what, MaxItems)
	}
}

// checkValue checks a value an expression produced.
func checkValue(v Value) {
	switch v.kind {
	case KindString:
		checkBytes(len(v.v.(string)), "a string")
	case KindList:
		checkItems(len(v.v.(*List).Items), "a list")
	}
}

// grownBytes is the size of s with every old (at most count, all when
// count < 0) replaced by new.
func grownBytes(s, old, new string, count int) int {
	if len(new) <= len(old) {
		return len(s)
	}
	n := 0
	if old == "" {
		n = utf8.RuneCountInString(s) + 1
	} else {
		n = strings.Count(s, old)
	}
	if count >= 0 && count < n {
		n = count
	}
	grow := len(new) - len(old)
	if n > 0 && grow > (MaxBytes-len(s))/n {
		return MaxBytes + 1
	}
	return len(s) + n*grow
}

// limiter tracks one render's work against its limits; it is shared by the
// evaluators of a render's macros and blocks.
type limiter struct {
	deadline time.Time
	timeout  time.Duration
	steps    int
	written  int
	depth    int
}

// step counts a node executed or a loop iteration, and stops the render
// past its deadline.
func (l *limiter) step() {
	if l == nil {
		return
	}
	l.steps++
	if l.steps%256 == 0 && time.Now().After(l.deadline) {
		exceed("rendering took longer than %v (the template's limit)", l.timeout)
	}
}

// wrote counts n bytes of output.
func (l *limiter) wrote(n int) {
	if l == nil {
		return
	}
	l.written += n
	checkBytes(l.written, "output")
}

// enter counts a nested macro or caller() call; leave undoes it.
func (l *limiter) enter() {
	if l == nil {
		return
	}
	l.depth++
	if l.depth > MaxDepth {
		exceed("macro calls nested more than %d deep (a macro that calls itself?)", MaxDepth)
	}
}

func (l *limiter) leave() {
	if l != nil {
		l.depth--
	}
}
