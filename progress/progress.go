package progress

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// Field is one value shown beside the step: a name and a value printed with Format (a fmt verb, "%.3f"
// when empty). A NaN value prints as "-".
type Field struct {
	Name   string
	Value  float64
	Format string
}

// F returns a Field printed with "%.3f".
func F(name string, v float64) Field { return Field{Name: name, Value: v} }

// Printer prints the progress of one run of Total steps. Its methods are safe for concurrent use.
type Printer struct {
	mu    sync.Mutex
	w     io.Writer
	label string
	total int
	// start is the step this process began at (0, or the step a resumed run loaded).
	start int
	unit  string
	began time.Time
	live  bool
	width int
	shown bool // a live bar is on screen
	now   func() time.Time
}

// New returns a Printer for a run of total steps that begins at step start (the resumed step, or 0),
// labelled label ("train", "sft", "eval"). It draws a live bar when w is a terminal and prints plain
// lines otherwise; a nil w prints nothing.
func New(w io.Writer, label string, total, start int) *Printer {
	p := &Printer{w: w, label: label, total: total, start: start, unit: "step", now: time.Now}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.live = true
		if width, _, err := term.GetSize(int(f.Fd())); err == nil {
			p.width = width
		}
	}
	p.began = p.now()
	return p
}

// SetUnit names what is counted ("step" unless set; "batch" for an evaluation).
func (p *Printer) SetUnit(unit string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unit = unit
}

// Step reports that step is done. On a terminal it redraws the bar with fields; elsewhere it prints
// nothing (Log prints the line).
func (p *Printer) Step(step int, fields ...Field) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == nil || !p.live {
		return
	}
	p.draw(step, fields)
}

// Log reports a logging step: on a terminal it redraws the bar, elsewhere it prints one line.
func (p *Printer) Log(step int, fields ...Field) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == nil {
		return
	}
	if p.live {
		p.draw(step, fields)
		return
	}
	fmt.Fprintln(p.w, p.line(step, fields, false))
}

// Printf prints a message on its own line; on a terminal the bar is cleared first and redrawn by the
// next Step or Log.
func (p *Printer) Printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == nil {
		return
	}
	p.clear()
	fmt.Fprintf(p.w, strings.TrimSuffix(format, "\n")+"\n", args...)
}

// Done ends the bar's line on a terminal, so that what follows starts on a new line.
func (p *Printer) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w != nil && p.live && p.shown {
		fmt.Fprintln(p.w)
		p.shown = false
	}
}

// Elapsed returns the time since New.
func (p *Printer) Elapsed() time.Duration { return p.now().Sub(p.began) }

func (p *Printer) clear() {
	if p.live && p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}

func (p *Printer) draw(step int, fields []Field) {
	s := p.line(step, fields, true)
	if p.width > 1 && len(s) >= p.width {
		s = s[:p.width-1]
	}
	fmt.Fprint(p.w, "\r\x1b[K"+s)
	p.shown = true
}

// barWidth is the number of cells of the live bar.
const barWidth = 20

// line formats the status: the label, step/total (with a bar when live), the fields, the speed and
// the time left.
func (p *Printer) line(step int, fields []Field, bar bool) string {
	var b strings.Builder
	b.WriteString(p.label)
	if bar && p.total > 0 {
		done := min(barWidth, barWidth*step/p.total)
		fmt.Fprintf(&b, " [%s%s] %d/%d %3d%%", strings.Repeat("#", done), strings.Repeat(".", barWidth-done),
			step, p.total, 100*step/p.total)
	} else if p.total > 0 {
		fmt.Fprintf(&b, " %s %d/%d", p.unit, step, p.total)
	} else {
		fmt.Fprintf(&b, " %s %d", p.unit, step)
	}
	for _, f := range fields {
		b.WriteString("  ")
		b.WriteString(f.Name)
		b.WriteByte(' ')
		if math.IsNaN(f.Value) {
			b.WriteByte('-')
			continue
		}
		format := f.Format
		if format == "" {
			format = "%.3f"
		}
		fmt.Fprintf(&b, format, f.Value)
	}
	elapsed := p.now().Sub(p.began)
	if ran := step - p.start; ran > 0 {
		per := elapsed.Seconds() / float64(ran)
		fmt.Fprintf(&b, "  %.2f s/%s", per, p.unit)
		if p.total > 0 && step < p.total {
			left := time.Duration(per * float64(p.total-step) * float64(time.Second))
			fmt.Fprintf(&b, "  ETA %s", clock(left))
		}
	}
	fmt.Fprintf(&b, "  elapsed %s", clock(elapsed))
	return b.String()
}

// clock formats d as m:ss, or h:mm:ss from an hour up.
func clock(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
