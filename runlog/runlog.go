package runlog

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcprl/mcprl/progress"
	"github.com/mcprl/mcprl/report"
	"gopkg.in/yaml.v3"

	"github.com/mcprl/mcprl/tensorboard"
)

// Options configure a Log.
type Options struct {
	// OutputDir is the run folder (output_dir).
	OutputDir string
	// Label names the run in progress output ("train", "sft").
	Label string
	// TotalSteps is the run's length; StartStep the step it begins at (a resumed run's).
	TotalSteps, StartStep int
	// Progress receives the progress (a live bar on a terminal, a line per logging step elsewhere);
	// nil prints nothing.
	Progress io.Writer
	// ReportTo is TRL's report_to: "tensorboard" (or "all") writes TensorBoard event files to
	// LoggingDir; "none" or nothing writes none.
	ReportTo []string
	// LoggingDir is TRL's logging_dir; "" is transformers' default, OUTPUT_DIR/runs/MonDD_HH-MM-SS_HOST.
	LoggingDir string
}

// Log is the run's log. Its methods are not safe for concurrent use.
type Log struct {
	opts        Options
	bar         *progress.Printer
	events      *tensorboard.Writer
	completions *os.File
}

// Open starts a run's log: it opens completions.jsonl (dropping the lines of steps after StartStep, which
// a resumed run redoes) and, when ReportTo asks for it, a TensorBoard event file.
func Open(opts Options) (*Log, error) {
	l := &Log{opts: opts, bar: progress.New(opts.Progress, opts.Label, opts.TotalSteps, opts.StartStep)}
	var err error
	if l.completions, err = openSteps(filepath.Join(opts.OutputDir, "completions.jsonl"), opts.StartStep); err != nil {
		return nil, err
	}
	tb, err := wantsTensorBoard(opts.ReportTo)
	if err != nil {
		l.completions.Close()
		return nil, err
	}
	if tb {
		dir := opts.LoggingDir
		if dir == "" {
			dir = DefaultLoggingDir(opts.OutputDir, time.Now())
		}
		if l.events, err = tensorboard.Create(dir); err != nil {
			l.completions.Close()
			return nil, err
		}
	}
	return l, nil
}

// CheckReportTo reports whether report_to names only destinations mcprl writes.
func CheckReportTo(reportTo []string) error {
	_, err := wantsTensorBoard(reportTo)
	return err
}

func wantsTensorBoard(reportTo []string) (bool, error) {
	tb := false
	for _, r := range reportTo {
		switch r {
		case "tensorboard", "all":
			tb = true
		case "none", "":
		default:
			return false, fmt.Errorf("report_to %q is not supported: mcprl writes TensorBoard event files (tensorboard) or none (none), and every run writes report.html", r)
		}
	}
	return tb, nil
}

// DefaultLoggingDir is transformers' default logging_dir: runs/ in the output folder, then the time and the
// host name.
func DefaultLoggingDir(outputDir string, now time.Time) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return filepath.Join(outputDir, "runs", now.Format("Jan02_15-04-05")+"_"+host)
}

// Step reports a finished step with a few values to show (the loss, the reward): on a terminal the bar is
// redrawn.
func (l *Log) Step(step int, fields ...progress.Field) { l.bar.Step(step, fields...) }

// Logged records a logging step: logs are the values written to metrics.jsonl (TRL's keys, NaN where
// undefined, "step" and "epoch" included) and samples the trajectories of the step. It appends the
// samples to completions.jsonl, writes the logs to TensorBoard under transformers' tags ("train/" + key;
// an undefined value is left out, as transformers leaves out None), and prints the progress line, showing
// the logged values of show's names.
func (l *Log) Logged(step int, logs map[string]float64, samples []report.Completion, show ...string) error {
	if len(samples) > 0 {
		w := bufio.NewWriter(l.completions)
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for _, s := range samples {
			if err := enc.Encode(s); err != nil {
				return fmt.Errorf("completions: %w", err)
			}
		}
		if err := w.Flush(); err != nil {
			return fmt.Errorf("completions: %w", err)
		}
	}
	if l.events != nil {
		tags := make(map[string]float64, len(logs))
		for k, v := range logs {
			if k == "step" || math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			tags["train/"+k] = v
		}
		if err := l.events.Scalars(int64(step), tags); err != nil {
			return err
		}
		if err := l.events.Flush(); err != nil {
			return err
		}
	}
	var fields []progress.Field
	for _, name := range show {
		if v, ok := logs[name]; ok {
			f := progress.F(name, v)
			if name == "loss" {
				f.Format = "%.4f"
			}
			fields = append(fields, f)
		}
	}
	l.bar.Log(step, fields...)
	return nil
}

// Saved rewrites report.html after a checkpoint (or the final model) was saved. The report is for
// looking at: a failure to write it is printed and the run goes on.
func (l *Log) Saved() {
	page := filepath.Join(l.opts.OutputDir, "report.html")
	warnings, err := report.Generate(page, l.opts.OutputDir)
	if len(warnings) > 0 {
		l.bar.Printf("report: skipped %d unreadable lines, first: %s", len(warnings), warnings[0])
	}
	if err != nil {
		l.bar.Printf("report: %v", err)
	}
}

// Printf prints a message on its own line (clearing a live bar first).
func (l *Log) Printf(format string, args ...any) { l.bar.Printf(format, args...) }

// Close ends the progress line and closes the files; closing again does nothing.
func (l *Log) Close() error {
	l.bar.Done()
	var err error
	if l.completions != nil {
		err = l.completions.Close()
		l.completions = nil
	}
	if l.events != nil {
		err = errors.Join(err, l.events.Close())
		l.events = nil
	}
	return err
}

// openSteps opens a JSONL file of step records for appending, first dropping the lines of steps after
// keep and any line cut short by a kill.
func openSteps(path string, keep int) (*os.File, error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("completions: %w", err)
	}
	var kept strings.Builder
	for _, line := range strings.SplitAfter(string(data), "\n") {
		var rec struct {
			Step int `json:"step"`
		}
		if !strings.HasSuffix(line, "\n") || json.Unmarshal([]byte(line), &rec) != nil || rec.Step > keep {
			continue
		}
		kept.WriteString(line)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("completions: %w", err)
	}
	if err := os.WriteFile(path, []byte(kept.String()), 0o644); err != nil {
		return nil, fmt.Errorf("completions: %w", err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("completions: %w", err)
	}
	return f, nil
}

// ReportTo is TRL's report_to as YAML holds it: one name ("tensorboard") or a list of names.
type ReportTo []string

// UnmarshalYAML implements yaml.Unmarshaler: a scalar is a list of one.
func (r *ReportTo) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*r = ReportTo{n.Value}
		return nil
	}
	var list []string
	if err := n.Decode(&list); err != nil {
		return fmt.Errorf("report_to must be a name or a list of names: %w", err)
	}
	*r = list
	return nil
}
