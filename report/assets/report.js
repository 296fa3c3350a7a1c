// The run report's page script: charts (uPlot), evaluation tables and the trajectory browser, all drawn
// from the JSON in #report-data. Every text from a run (model output, tool results) goes into the page
// through textContent, never as HTML.
(function () {
  "use strict";

  const data = JSON.parse(document.getElementById("report-data").textContent);
  const runs = data.runs;
  const palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
  const color = (i) => palette[i % palette.length];
  // window.mcprlReport lists the drawn charts (metric, uPlot instance) for inspection from the console.
  const report = { charts: [], smoothing: 0.6 };
  window.mcprlReport = report;

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const c of children) {
      if (c == null) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function num(v, digits) {
    if (v == null || Number.isNaN(v)) return "–";
    if (!Number.isFinite(v)) return String(v);
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(2);
    return v.toFixed(digits == null ? 3 : digits);
  }

  // TensorBoard's smoothing: an exponential moving average, debiased for its first points.
  function smooth(ys, w) {
    let last = 0, n = 0;
    return ys.map((y) => {
      if (y == null || !Number.isFinite(y)) return null;
      last = last * w + (1 - w) * y;
      n++;
      return last / (w === 1 ? 1 : 1 - Math.pow(w, n));
    });
  }

  function renderRuns() {
    const box = document.getElementById("runs");
    const list = el("ul", { class: "run-list" });
    runs.forEach((r, i) => {
      const parts = [];
      if (r.steps.length) parts.push(r.steps.length + " logged steps, last " + r.steps[r.steps.length - 1]);
      if (r.samples.length) parts.push("trajectories at " + r.samples.length + " steps");
      if (r.evals.length) parts.push(r.evals.length + " evaluation" + (r.evals.length > 1 ? "s" : ""));
      list.append(el("li", {},
        el("span", { class: "swatch", style: "background:" + color(i) }),
        el("b", { text: r.name }), " ", el("code", { text: r.dir }), " — " + parts.join(", ")));
      for (const w of r.warnings || []) list.append(el("li", { class: "warning", text: "skipped " + w }));
    });
    box.append(list);
  }

  function renderTOC() {
    const toc = document.getElementById("toc");
    const links = [];
    if (data.sections.length) links.push(["#curves", "Curves"]);
    if (runs.some((r) => r.evals.length)) links.push(["#evals", "Evaluation"]);
    if (runs.some((r) => r.samples.length || r.evals.some((e) => e.tasks.length))) links.push(["#browser", "Trajectories"]);
    for (const [href, label] of links) toc.append(el("a", { href: href, text: label }));
  }

  // chartData aligns the runs' values of key on the union of their steps: x, then per run the raw and
  // the smoothed series.
  function chartData(key, w) {
    const steps = new Set();
    const having = [];
    runs.forEach((r, i) => {
      if (!r.series[key]) return;
      having.push(i);
      r.steps.forEach((s, j) => { if (r.series[key][j] != null) steps.add(s); });
    });
    const xs = Array.from(steps).sort((a, b) => a - b);
    const out = [xs];
    for (const i of having) {
      const r = runs[i];
      const at = new Map();
      r.steps.forEach((s, j) => at.set(s, r.series[key][j]));
      const own = r.steps.filter((s, j) => r.series[key][j] != null);
      const sm = new Map();
      smooth(own.map((s) => at.get(s)), w).forEach((v, j) => sm.set(own[j], v));
      out.push(xs.map((s) => (at.has(s) ? at.get(s) : null)));
      out.push(xs.map((s) => (sm.has(s) ? sm.get(s) : null)));
    }
    return { data: out, runs: having };
  }

  // yRange pads the data's range; a constant series gets a band around its value rather than 0..100.
  function yRange(u, min, max) {
    if (min == null || max == null) return [0, 1];
    if (min === max) {
      const pad = Math.abs(min) * 0.1 || 1;
      return [min - pad, max + pad];
    }
    return uPlot.rangeNum(min, max, 0.1, true);
  }

  function tick(v) {
    if (v == null) return "";
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(1);
    return String(Number(v.toPrecision(4)));
  }

  function chartWidth(box) { return Math.max(280, box.clientWidth - 16); }

  function drawChart(box, key) {
    const cd = chartData(key, report.smoothing);
    if (cd.data[0].length === 0) return;
    const series = [{ label: "step" }];
    for (const i of cd.runs) {
      series.push({ label: runs[i].name + " raw", class: "raw", stroke: color(i) + "55", width: 1, spanGaps: true, points: { show: cd.data[0].length < 3 } });
      series.push({ label: runs[i].name, stroke: color(i), width: 2, spanGaps: true, points: { show: cd.data[0].length < 3 } });
    }
    const opts = {
      width: chartWidth(box), height: 200,
      scales: { x: { time: false }, y: { range: yRange } },
      series: series,
      axes: [{ label: "step" }, { size: 60, values: (u, ticks) => ticks.map(tick) }],
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
    };
    const plot = new uPlot(opts, cd.data, box);
    report.charts.push({ metric: key, plot: plot, runs: cd.runs.map((i) => runs[i].name) });
    const last = cd.runs.map((i) => {
      const r = runs[i], ys = r.series[key];
      for (let j = ys.length - 1; j >= 0; j--) if (ys[j] != null) return r.name + " " + num(ys[j]) + " at step " + r.steps[j];
      return r.name + " –";
    });
    box.dataset.points = String(cd.data[0].length);
    box.append(el("p", { class: "last", text: "last: " + last.join("; ") }));
  }

  function renderCurves() {
    const root = document.getElementById("curves");
    if (!data.sections.length) return;
    root.append(el("h2", { text: "Curves" }));
    const slider = el("input", { type: "range", min: "0", max: "0.99", step: "0.01", value: String(report.smoothing), id: "smoothing" });
    const shown = el("span", { text: report.smoothing.toFixed(2) });
    slider.addEventListener("input", () => {
      report.smoothing = Number(slider.value);
      shown.textContent = report.smoothing.toFixed(2);
      for (const c of report.charts) c.plot.setData(chartData(c.metric, report.smoothing).data);
    });
    root.append(el("p", { class: "controls" },
      el("label", { for: "smoothing", text: "Smoothing (TensorBoard's EMA) " }), slider, " ", shown,
      el("span", { class: "hint", text: " — faint lines are raw values, solid lines smoothed; drag across a chart to zoom, double-click to reset." })));
    for (const sec of data.sections) {
      root.append(el("h3", { text: sec.title }));
      const grid = el("div", { class: "grid" });
      root.append(grid);
      for (const key of sec.keys) {
        const box = el("figure", { class: "chart", "data-metric": key }, el("figcaption", { text: key }));
        grid.append(box);
        drawChart(box, key);
      }
    }
    let pending = null;
    window.addEventListener("resize", () => {
      clearTimeout(pending);
      pending = setTimeout(() => {
        for (const c of report.charts) c.plot.setSize({ width: chartWidth(c.plot.root.parentNode), height: 200 });
      }, 100);
    });
  }

  const evalColumns = [
    ["success_rate", "success"], ["pass_at_k", "pass@k"], ["tool_accuracy", "tool accuracy"],
    ["hallucination_rate", "hallucinated tools"], ["format_error_rate", "format errors"],
    ["mean_turns", "mean turns"], ["self_correction_rate", "self-correction"],
  ];

  function metricCells(m) {
    const cells = evalColumns.map(([key, label]) => {
      let text = num(m[key]);
      if (key === "self_correction_rate" && m.n_setback != null) text += " (" + m.n_self_corrected + " of " + m.n_setback + ")";
      return el("td", { class: "num", text: text });
    });
    cells.push(el("td", { class: "num", text: (m.n_tasks != null ? m.n_tasks : "–") + " × " + (m.n_trajectories && m.n_tasks ? num(m.n_trajectories / m.n_tasks, 0) : "–") }));
    return cells;
  }

  function renderEvals() {
    const evals = [];
    runs.forEach((r, i) => r.evals.forEach((e) => evals.push({ run: r, i: i, e: e })));
    if (!evals.length) return;
    const root = document.getElementById("evals");
    root.append(el("h2", { text: "Evaluation" }));
    const head = el("tr", {}, el("th", { text: "run" }), el("th", { text: "evaluation" }));
    for (const [, label] of evalColumns) head.append(el("th", { text: label }));
    head.append(el("th", { text: "tasks × samples" }));
    const body = el("tbody");
    for (const { run, i, e } of evals) {
      const s = e.summary;
      const row = el("tr", {}, el("td", {}, el("span", { class: "swatch", style: "background:" + color(i) }), run.name), el("td", { text: e.name }));
      for (const c of metricCells(s)) row.append(c);
      body.append(row);
    }
    root.append(el("table", { class: "eval", id: "eval-summary" }, el("thead", {}, head), body));
    root.append(el("p", { class: "hint", text: "pass@k with k as each evaluation's --k; self-correction counts the trajectories with a failed or empty call that still succeeded." }));
    for (const { run, e } of evals) {
      const cats = Object.keys(e.summary.categories || {}).sort();
      if (!cats.length) continue;
      root.append(el("h3", { text: run.name + " / " + e.name + ": per category (k = " + e.summary.k + ")" }));
      const h = el("tr", {}, el("th", { text: "category" }));
      for (const [, label] of evalColumns) h.append(el("th", { text: label }));
      h.append(el("th", { text: "tasks × samples" }));
      const b = el("tbody");
      for (const c of cats) {
        const row = el("tr", {}, el("td", { text: c }));
        for (const cell of metricCells(e.summary.categories[c])) row.append(cell);
        b.append(row);
      }
      root.append(el("table", { class: "eval" }, el("thead", {}, h), b));
    }
  }

  function pre(text, cls) { return el("pre", { class: cls || "", text: text }); }

  function trajectoryCard(t) {
    const head = el("div", { class: "card-head" }, el("b", { text: "#" + t.index }));
    if (t.branch_of != null) head.append(el("span", { class: "pill branch", text: "branch of #" + t.branch_of + " after turn " + t.branch_turn + (t.branch_trigger ? " (" + t.branch_trigger.replace("_", " ") + ")" : "") }));
    if (t.reward != null) head.append(el("span", { class: "pill", text: "reward " + num(t.reward) }));
    if (t.advantage != null) head.append(el("span", { class: "pill " + (t.advantage > 0 ? "pos" : t.advantage < 0 ? "neg" : ""), text: "advantage " + (t.advantage > 0 ? "+" : "") + num(t.advantage) }));
    if (t.success != null) head.append(el("span", { class: "pill " + (t.success ? "pos" : "neg"), text: t.success ? "success" : "failure" }));
    if (t.truncated) head.append(el("span", { class: "pill neg", text: "truncated" }));
    const card = el("div", { class: "card" }, head);
    if (t.rewards) {
      const tbl = el("table", { class: "rewards" });
      for (const name of Object.keys(t.rewards).sort()) {
        tbl.append(el("tr", {}, el("td", { text: name }), el("td", { class: "num", text: num(t.rewards[name]) })));
        for (const p of (t.parts && t.parts[name]) || []) {
          tbl.append(el("tr", { class: "part" }, el("td", { text: "  " + p.name + " × " + p.weight }), el("td", { class: "num", text: num(p.score) })));
        }
      }
      card.append(tbl);
    }
    if (t.error) card.append(pre("ended: " + t.error, "error"));
    if (t.branch_of != null) card.classList.add("branch");
    t.turns.forEach((turn, k) => {
      if (t.branch_of != null && k < t.branch_turn) {
        // The root's turns: shown once, on the root's card.
        if (k === t.branch_turn - 1) card.append(el("div", { class: "role", text: "turns 1-" + t.branch_turn + " as #" + t.branch_of + ", up to its setback; then this branch:" }));
        return;
      }
      card.append(el("div", { class: "role", text: "assistant, turn " + (k + 1) }));
      card.append(pre(turn.text, "assistant"));
      for (const c of turn.calls || []) {
        const args = c.arguments == null ? "" : JSON.stringify(c.arguments);
        card.append(el("div", { class: "call" + (c.parse_error ? " bad" : c.is_error ? " failed" : "") },
          el("span", { class: "tool", text: "→ " + (c.name || "(unparsed)") }), el("code", { text: args })));
        if (c.parse_error) card.append(pre("parse error: " + c.parse_error, "error"));
        else card.append(pre(c.result, c.is_error ? "result error" : "result"));
      }
    });
    return card;
  }

  function renderGroups(box, groups, label) {
    box.textContent = "";
    groups.forEach((g, gi) => {
      const head = el("div", { class: "group-head" }, el("b", { text: (groups.length > 1 ? label + " " + (gi + 1) : label) + ": " + g.task_id }));
      if (g.category) head.append(" ", el("span", { class: "pill", text: g.category }));
      const block = el("div", { class: "group" }, head);
      if (g.prompt) block.append(pre(g.prompt, "prompt"));
      const row = el("div", { class: "trajectories" });
      for (const t of g.trajectories) row.append(trajectoryCard(t));
      block.append(row);
      box.append(block);
    });
  }

  function renderBrowser() {
    const sources = [];
    runs.forEach((r) => {
      if (r.samples.length) sources.push({ run: r, label: r.name + ": training samples", steps: r.samples });
      for (const e of r.evals) if (e.tasks.length) sources.push({ run: r, label: r.name + ": " + e.name, tasks: e.tasks });
    });
    if (!sources.length) return;
    const root = document.getElementById("browser");
    root.append(el("h2", { text: "Trajectories" }));
    const pick = el("select", { id: "source" });
    sources.forEach((s, i) => pick.append(el("option", { value: String(i), text: s.label })));
    const which = el("select", { id: "step" });
    const whichLabel = el("label", { for: "step" });
    const box = el("div", { id: "groups" });
    root.append(el("p", { class: "controls" }, el("label", { for: "source", text: "Source " }), pick, " ", whichLabel, which));
    root.append(box);
    // A training source shows one logging step's groups at a time; an evaluation one task's samples.
    function show() {
      const s = sources[Number(pick.value)];
      const i = Number(which.value);
      if (s.steps) renderGroups(box, s.steps[i].groups, "group");
      else renderGroups(box, [s.tasks[i]], "task " + (i + 1) + " of " + s.tasks.length + ",");
    }
    function showSource() {
      const s = sources[Number(pick.value)];
      which.textContent = "";
      if (s.steps) {
        whichLabel.textContent = "Step ";
        s.steps.forEach((st, i) => which.append(el("option", { value: String(i), text: String(st.step) })));
        which.value = String(s.steps.length - 1);
      } else {
        whichLabel.textContent = "Task ";
        s.tasks.forEach((g, i) => which.append(el("option", { value: String(i), text: g.task_id + (g.category ? " (" + g.category + ")" : "") })));
        which.value = "0";
      }
      show();
    }
    pick.addEventListener("change", showSource);
    which.addEventListener("change", show);
    showSource();
  }

  renderRuns();
  renderTOC();
  renderCurves();
  renderEvals();
  renderBrowser();
  document.body.dataset.ready = "true";
})();
