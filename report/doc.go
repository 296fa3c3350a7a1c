// Package report turns run folders into one self-contained HTML page to look at: the curves of
// metrics.jsonl (raw and smoothed, one chart per metric, several runs overlaid), the evaluation tables of
// an `mcprl eval --output-dir` folder, and a browser of sampled trajectories (each group's trajectories
// side by side with their tool calls, results, rewards and advantages).
//
// A run folder is read as written by mcprl train, mcprl sft and mcprl eval:
//
//   - metrics.jsonl: one JSON object per logging step with TRL's key names (null for an undefined value);
//   - completions.jsonl: Completion records, the trajectories sampled at each logging step;
//   - report.json and trajectories.jsonl: an evaluation's summary and its scored trajectories, in the
//     folder itself or in any folder directly under it.
//
// The page's scripts and styles are inline (the uPlot charting library is vendored in assets/uplot and
// embedded), so it opens from disk with no network. report is a data package: it reads JSON files and
// writes HTML, and links no tensor engine.
package report
