package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath returns a headless-capable Chromium (Debian's chromium package; scripts/test-setup.sh
// installs it). Without one the test skips, and fails under CI=true.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH: run scripts/test-setup.sh")
	}
	t.Skip("no chromium on PATH: run scripts/test-setup.sh")
	return ""
}

// browserPage is a report opened in headless Chromium, with what the browser reported while loading it.
type browserPage struct {
	ctx      context.Context
	mu       sync.Mutex
	problems []string // console errors and warnings, uncaught exceptions, browser log errors
	requests []string // every URL the page asked for
}

func (p *browserPage) record(list *[]string, s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	*list = append(*list, s)
}

// openReport writes the report of runs and opens it in headless Chromium at the given viewport width.
func openReport(t *testing.T, width int, runs ...*Run) (*browserPage, string) {
	t.Helper()
	bin := chromiumPath(t)
	path := filepath.Join(t.TempDir(), "report.html")
	if err := WriteFile(path, runs...); err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.WindowSize(width, 1000))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run its sandbox as root
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	p := &browserPage{ctx: bctx}
	err := chromedp.Listen(bctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				p.record(&p.problems, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			desc := ""
			if d.Exception != nil {
				desc = d.Exception.Description
			}
			p.record(&p.problems, fmt.Sprintf("uncaught: %s %s (%s:%d)", d.Text, desc, d.URL, d.LineNumber))
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError || ev.Entry.Level == cdplog.EntryLevelWarning {
				p.record(&p.problems, fmt.Sprintf("log %s: %s %s", ev.Entry.Level, ev.Entry.Text, ev.Entry.URL))
			}
		case *network.EventRequestWillBeSent:
			p.record(&p.requests, ev.Request.URL)
		}
	})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if _, err := chromedp.Call(bctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(bctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate("file://"+path)); err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	wctx, wcancel := context.WithTimeout(bctx, 2*time.Minute)
	defer wcancel()
	err = chromedp.Do(wctx, chromedp.WaitReady(chromedp.CSS(`body[data-ready="true"]`)))
	if err != nil {
		t.Fatalf("open %s: %v (browser problems: %v)", path, err, p.problems)
	}
	return p, path
}

// checkClean fails on any console error, exception, or request other than the page itself.
func (p *browserPage) checkClean(t *testing.T, path string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.problems {
		t.Errorf("browser: %s", s)
	}
	for _, u := range p.requests {
		if u != "file://"+path && !strings.HasPrefix(u, "data:") {
			t.Errorf("the page requested %s: a report loads nothing", u)
		}
	}
}

// evaluate runs js in the page and decodes its value.
func evaluate[T any](t *testing.T, p *browserPage, js string) T {
	t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// drawnChart is what a chart holds in the browser: its metric, its runs and uPlot's data (x, then
// each run's raw and smoothed series).
type drawnChart struct {
	Metric string       `json:"metric"`
	Runs   []string     `json:"runs"`
	Data   [][]*float64 `json:"data"`
	Canvas [2]float64   `json:"canvas"`
	Points string       `json:"points"`
	Figure string       `json:"figure"`
}

const chartsJS = `mcprlReport.charts.map(c => ({
	metric: c.metric, runs: c.runs, data: c.plot.data,
	canvas: [c.plot.root.querySelector("canvas").width, c.plot.root.querySelector("canvas").height],
	points: c.plot.root.parentNode.dataset.points,
	figure: c.plot.root.parentNode.getAttribute("data-metric"),
}))`

// tbSmooth is TensorBoard's smoothing (an EMA debiased for its first points), written from
// tensorboard/webapp/widgets/line_chart_v2/lib/data_transformer.ts's classicSmoothing.
func tbSmooth(ys []float64, w float64) []float64 {
	out := make([]float64, len(ys))
	last, n := 0.0, 0
	for i, y := range ys {
		last = last*w + (1-w)*y
		n++
		debias := 1.0
		if w != 1 {
			debias = 1 - math.Pow(w, float64(n))
		}
		out[i] = last / debias
	}
	return out
}

// TestBrowserCharts opens the report of a GRPO run and an SFT run in headless Chromium: no console
// errors, nothing loaded from the network, and every metric of both metrics.jsonl files drawn as a chart
// holding exactly the file's values, raw and smoothed. It saves a screenshot of the whole page as a
// test artifact ($MCPRL_TEST_ARTIFACTS, else the system's temp folder).
func TestBrowserCharts(t *testing.T) {
	grpoRun, err := Load("testdata/grpo")
	if err != nil {
		t.Fatal(err)
	}
	sftRun, err := Load("testdata/sft")
	if err != nil {
		t.Fatal(err)
	}
	sampledRun, err := Load("testdata/quick6")
	if err != nil {
		t.Fatal(err)
	}
	p, path := openReport(t, 1400, grpoRun, sftRun, sampledRun)

	charts := evaluate[[]drawnChart](t, p, chartsJS)
	byMetric := map[string]drawnChart{}
	for _, c := range charts {
		byMetric[c.Metric] = c
		if c.Figure != c.Metric || c.Canvas[0] < 200 || c.Canvas[1] < 100 {
			t.Errorf("chart %s: figure %q, canvas %v: want it drawn in its figure", c.Metric, c.Figure, c.Canvas)
		}
		if c.Points != fmt.Sprint(len(c.Data[0])) {
			t.Errorf("chart %s: data-points %q, %d points", c.Metric, c.Points, len(c.Data[0]))
		}
	}
	files := map[string]map[int]map[string]*float64{
		"grpo":   metricsOf(t, "testdata/grpo/metrics.jsonl"),
		"sft":    metricsOf(t, "testdata/sft/metrics.jsonl"),
		"quick6": metricsOf(t, "testdata/quick6/metrics.jsonl"),
	}
	keys := map[string]bool{}
	for _, steps := range files {
		for _, rec := range steps {
			for k := range rec {
				keys[k] = k != "step" && k != "epoch"
			}
		}
	}
	for key, want := range keys {
		if !want {
			continue
		}
		c, ok := byMetric[key]
		if !ok {
			t.Errorf("no chart of %s", key)
			continue
		}
		for ri, run := range c.Runs {
			raw, smoothed := c.Data[1+2*ri], c.Data[2+2*ri]
			var xs, ys []float64
			for i, x := range c.Data[0] {
				v := files[run][int(*x)][key]
				if (raw[i] == nil) != (v == nil) || v != nil && *raw[i] != *v {
					t.Fatalf("%s, run %s, step %v: drawn %v, metrics.jsonl %v", key, run, *x, deref(raw[i]), deref(v))
				}
				if v != nil {
					xs, ys = append(xs, *x), append(ys, *v)
				}
			}
			n := 0
			for _, rec := range files[run] {
				if v, ok := rec[key]; ok && v != nil {
					n++
				}
			}
			if len(ys) != n {
				t.Errorf("%s, run %s: %d points drawn, metrics.jsonl has %d", key, run, len(ys), n)
			}
			sm := tbSmooth(ys, 0.6)
			j := 0
			for i := range c.Data[0] {
				if raw[i] == nil {
					continue
				}
				if smoothed[i] == nil || math.Abs(*smoothed[i]-sm[j]) > 1e-12 {
					t.Errorf("%s, run %s, step %v: smoothed %v, TensorBoard's smoothing %v", key, run, xs[j], deref(smoothed[i]), sm[j])
				}
				j++
			}
		}
	}
	if c := byMetric["loss"]; len(c.Runs) != 3 {
		t.Errorf("loss chart overlays runs %v, want grpo, sft and quick6", c.Runs)
	}
	// Per-tool curves come from the sampled trajectories.
	if c, ok := byMetric["per_tool/query_database/call_frequency"]; !ok || len(c.Runs) != 1 || len(c.Data[0]) != 6 {
		t.Errorf("per-tool chart: %+v", c)
	}

	shot, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	checkScreenshot(t, shot)
	saveArtifact(t, "report-full.png", shot)
	if os.Getenv("MCPRL_UPDATE_DOCS") == "1" {
		top, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../docs/report.png", top, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Moving the smoothing slider redraws every chart's smoothed series.
	smoothedAfter := evaluate[[]*float64](t, p, `(() => { const s = document.getElementById("smoothing"); s.value = "0"; s.dispatchEvent(new Event("input"));
		return mcprlReport.charts.find(c => c.metric === "reward").plot.data[2]; })()`)
	rewardRaw := byMetric["reward"].Data[1]
	for i := range rewardRaw {
		if deref(rewardRaw[i]) != deref(smoothedAfter[i]) {
			t.Fatalf("smoothing 0: step %d smoothed %v, raw %v", i, deref(smoothedAfter[i]), deref(rewardRaw[i]))
		}
	}

	// The evaluation table holds report.json's numbers.
	evalText := evaluate[string](t, p, `document.getElementById("eval-summary").innerText`)
	var summary struct {
		SuccessRate  float64 `json:"success_rate"`
		ToolAccuracy float64 `json:"tool_accuracy"`
		MeanTurns    float64 `json:"mean_turns"`
	}
	if err := json.Unmarshal(grpoRun.Evals[0].Summary, &summary); err != nil {
		t.Fatal(err)
	}
	for _, v := range []float64{summary.SuccessRate, summary.ToolAccuracy, summary.MeanTurns} {
		if s := fmt.Sprintf("%.3f", v); !strings.Contains(evalText, s) {
			t.Errorf("evaluation table %q lacks %s", evalText, s)
		}
	}

	// The trajectory browser shows the evaluation's first task, its samples side by side.
	type browsed struct {
		Source string `json:"source"`
		Cards  int    `json:"cards"`
		Tasks  int    `json:"tasks"`
	}
	b := evaluate[browsed](t, p, `({source: document.querySelector("#source option:checked").textContent,
		cards: document.querySelectorAll("#groups .card").length, tasks: document.querySelectorAll("#step option").length})`)
	ev := grpoRun.Evals[0]
	if b.Source != "grpo: eval-heldout" || b.Cards != len(ev.Tasks[0].Trajectories) || b.Tasks != len(ev.Tasks) {
		t.Errorf("browser shows %+v, want grpo: eval-heldout, %d cards, %d tasks", b, len(ev.Tasks[0].Trajectories), len(ev.Tasks))
	}
	// The training samples of quick6: the last logging step's groups, side by side, one card per
	// trajectory of completions.jsonl.
	perStep := map[int]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(mustRead(t, "testdata/quick6/completions.jsonl"))), "\n") {
		var c Completion
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatal(err)
		}
		perStep[c.Step]++
	}
	b = evaluate[browsed](t, p, `(() => { const s = document.getElementById("source");
		s.value = Array.from(s.options).find(o => o.textContent === "quick6: training samples").value;
		s.dispatchEvent(new Event("change"));
		return {source: s.options[s.selectedIndex].textContent, cards: document.querySelectorAll("#groups .card").length,
			tasks: document.querySelectorAll("#step option").length}; })()`)
	if b.Source != "quick6: training samples" || b.Cards != perStep[6] || b.Tasks != len(perStep) {
		t.Errorf("browser shows %+v, want quick6's %d trajectories of step 6 and %d steps", b, perStep[6], len(perStep))
	}
	if os.Getenv("MCPRL_UPDATE_DOCS") == "1" {
		shot, err := chromedp.Run(p.ctx, chromedp.Screenshot(chromedp.CSS(`#groups .group`)))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../docs/report-trajectories.png", shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p.checkClean(t, path)
}

// TestBrowserTrajectories opens a run whose model output and tool results try to inject markup: they
// appear as text, nothing runs and nothing loads; each group's trajectories are side by side with
// their calls, results, rewards and advantages.
func TestBrowserTrajectories(t *testing.T) {
	run, err := Load("testdata/hostile")
	if err != nil {
		t.Fatal(err)
	}
	p, path := openReport(t, 1200, run)
	type browsed struct {
		Pwned      any      `json:"pwned"`
		Groups     int      `json:"groups"`
		Cards      []int    `json:"cards"`
		Images     int      `json:"images"`
		Steps      []string `json:"steps"`
		FirstCard  string   `json:"firstCard"`
		Advantages []string `json:"advantages"`
	}
	got := evaluate[browsed](t, p, `({
		pwned: window.pwned === undefined ? null : window.pwned,
		groups: document.querySelectorAll("#groups .group").length,
		cards: Array.from(document.querySelectorAll("#groups .group")).map(g => g.querySelectorAll(".card").length),
		images: document.querySelectorAll("img").length,
		steps: Array.from(document.querySelectorAll("#step option")).map(o => o.textContent),
		firstCard: document.querySelector("#groups .card").innerText,
		advantages: Array.from(document.querySelectorAll("#groups .group")[0].querySelectorAll(".pill")).map(e => e.textContent).filter(s => s.startsWith("advantage")),
	})`)
	if got.Pwned != nil || got.Images != 0 {
		t.Errorf("injected markup ran: window.pwned = %v, %d img elements", got.Pwned, got.Images)
	}
	if got.Groups != 2 || len(got.Cards) != 2 || got.Cards[0] != 3 || got.Cards[1] != 3 {
		t.Errorf("groups %d, cards %v: want 2 groups of 3 trajectories", got.Groups, got.Cards)
	}
	if strings.Join(got.Steps, ",") != "1,2" {
		t.Errorf("step choices %v, want 1, 2", got.Steps)
	}
	for _, want := range []string{"window.pwned = 1", "query_database", "parse error: unterminated", "reward 0.000", "seed"} {
		if !strings.Contains(got.FirstCard, want) {
			t.Errorf("first trajectory's card lacks %q:\n%s", want, got.FirstCard)
		}
	}
	if strings.Join(got.Advantages, ",") != "advantage -1.000,advantage 0.000,advantage +1.000" {
		t.Errorf("advantages %v", got.Advantages)
	}
	p.checkClean(t, path)
}

// A recovery branch is shown right after its root, marked with where it
// branched, and without the root's turns repeated.
func TestBrowserRecoveryBranch(t *testing.T) {
	run, err := Load("testdata/branching")
	if err != nil {
		t.Fatal(err)
	}
	p, path := openReport(t, 1200, run)
	type browsed struct {
		Heads  []string `json:"heads"`
		Branch string   `json:"branch"`
	}
	got := evaluate[browsed](t, p, `({
		heads: Array.from(document.querySelectorAll("#groups .card .card-head b")).map(e => e.textContent),
		branch: document.querySelectorAll("#groups .card")[1].innerText,
	})`)
	if strings.Join(got.Heads, ",") != "#0,#2,#3,#1" {
		t.Errorf("cards in the order %v, want each root followed by its branches: #0,#2,#3,#1", got.Heads)
	}
	for _, want := range []string{"branch of #0 after turn 1 (tool error)", "turns 1-1 as #0", "The table is customers.", "assistant, turn 2"} {
		if !strings.Contains(got.Branch, want) {
			t.Errorf("the branch's card lacks %q:\n%s", want, got.Branch)
		}
	}
	if strings.Contains(got.Branch, "custmers") {
		t.Errorf("the branch's card repeats its root's turns:\n%s", got.Branch)
	}
	p.checkClean(t, path)
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkScreenshot(t *testing.T, b []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	bounds := img.Bounds()
	colors := map[[3]uint32]bool{}
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 7 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 7 {
			r, g, b, _ := img.At(x, y).RGBA()
			colors[[3]uint32{r >> 8, g >> 8, b >> 8}] = true
		}
	}
	if bounds.Dx() < 1000 || bounds.Dy() < 2000 || len(colors) < 20 {
		t.Errorf("screenshot %v with %d colours: want a long page with charts", bounds, len(colors))
	}
}

// saveArtifact writes a test artifact to $MCPRL_TEST_ARTIFACTS (CI uploads that folder), else to
// mcprl-test-artifacts in the system's temp folder.
func saveArtifact(t *testing.T, name string, b []byte) {
	t.Helper()
	dir := os.Getenv("MCPRL_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "mcprl-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
