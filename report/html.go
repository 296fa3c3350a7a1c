package report

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

var (
	//go:embed assets/uplot/uPlot.iife.min.js
	uplotJS string
	//go:embed assets/uplot/uPlot.min.css
	uplotCSS string
	//go:embed assets/report.js
	reportJS string
	//go:embed assets/report.css
	reportCSS string
	//go:embed assets/report.html
	pageHTML string
)

// page is what the HTML template and the page's script read.
type page struct {
	Title     string    `json:"title"`
	Generated string    `json:"generated"`
	Runs      []*Run    `json:"runs"`
	Sections  []Section `json:"sections"`
}

// Write writes the report of runs as one self-contained HTML page.
func Write(w io.Writer, runs ...*Run) error {
	if len(runs) == 0 {
		return fmt.Errorf("report: no runs")
	}
	names := make([]string, len(runs))
	for i, r := range runs {
		names[i] = r.Name
	}
	uniqueNames(runs)
	for _, r := range runs {
		r.normalize()
	}
	p := page{
		Title:     "mcprl report: " + strings.Join(names, ", "),
		Generated: time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		Runs:      runs,
		Sections:  metricSections(runs),
	}
	// encoding/json escapes <, > and & inside strings, so the data cannot close its script element.
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	tmpl, err := template.New("report").Parse(pageHTML)
	if err != nil {
		return fmt.Errorf("report: template: %w", err)
	}
	var buf bytes.Buffer
	err = tmpl.Execute(&buf, map[string]any{
		"Title":     p.Title,
		"Generated": p.Generated,
		"UplotCSS":  template.CSS(uplotCSS),
		"ReportCSS": template.CSS(reportCSS),
		"UplotJS":   template.JS(uplotJS),
		"ReportJS":  template.JS(reportJS),
		"Data":      template.JS(data),
	})
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// WriteFile writes the report of runs to path, through a temporary file renamed into place so that a
// reader never sees half a page.
func WriteFile(path string, runs ...*Run) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".report-*.html")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer os.Remove(f.Name())
	if err := Write(f, runs...); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("report: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// uniqueNames gives runs of the same folder name their parent's name too (runs/a/final, runs/b/final).
func uniqueNames(runs []*Run) {
	count := map[string]int{}
	for _, r := range runs {
		count[r.Name]++
	}
	for _, r := range runs {
		if count[r.Name] > 1 {
			r.Name = filepath.Join(filepath.Base(filepath.Dir(filepath.Clean(r.Dir))), r.Name)
		}
	}
}

// Generate loads the run folders dirs and writes their report to path. It returns the folders'
// warnings (the lines that could not be read, as file:line: problem) with or without an error.
func Generate(path string, dirs ...string) (warnings []string, err error) {
	runs := make([]*Run, 0, len(dirs))
	for _, d := range dirs {
		r, err := Load(d)
		if err != nil {
			return warnings, err
		}
		warnings = append(warnings, r.Warnings...)
		runs = append(runs, r)
	}
	return warnings, WriteFile(path, runs...)
}

// normalize gives every list of r a value, so that the page reads [] rather than null.
func (r *Run) normalize() {
	if r.Steps == nil {
		r.Steps = []int{}
	}
	if r.Series == nil {
		r.Series = map[string][]*float64{}
	}
	if r.Samples == nil {
		r.Samples = []SampledStep{}
	}
	if r.Evals == nil {
		r.Evals = []Eval{}
	}
	for i := range r.Evals {
		if r.Evals[i].Tasks == nil {
			r.Evals[i].Tasks = []Group{}
		}
	}
	if r.Warnings == nil {
		r.Warnings = []string{}
	}
}
