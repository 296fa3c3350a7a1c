#!/usr/bin/env python3
"""The results table of scripts/experiment.sh, from its output folder.

    python3 scripts/experiment-results.py OUT SEED...   # e.g. runs/experiment 1 2 3; prints markdown

Reads OUT/seed-S/eval-{sft,sft-control,grpo}.json (mcprl eval --json) and, where GRPO_EVAL_STEPS evaluated
GRPO's checkpoints, OUT/seed-S/eval-grpo-STEP.json; OUT/seed-S/init.log,
OUT/seed-S/grpo.yaml, OUT/seed-S/grpo/{metrics,completions}.jsonl, OUT/times.tsv and OUT/load.tsv;
what is missing is shown as missing.
"""
import collections
import functools
import glob
import json
import re
import statistics
import sys

# Generated edge cases (taskgen.EdgeCases); every hand-written task is an edge case.
EDGE = {"case-variants", "empty-first", "nulls", "renamed-column", "look-alike-column", "sql-error", "lint-first"}
MODELS = [("sft", "SFT"), ("sft-control", "SFT, control (as many more sequences)"), ("grpo", "SFT + GRPO")]
HELD_OUT = ("handwritten", "library", "unseen")
SETS = [("*", "every held-out edge case (the goal's measure: the three held-out sets' edge cases pooled)", True),
        ("handwritten", "hand-written edge cases", None),
        ("library", "generated, library fixture (never trained on): edge cases", True),
        ("library", "generated, library fixture (never trained on): ordinary", False),
        ("unseen", "generated, training fixtures, unseen questions: edge cases", True),
        ("unseen", "generated, training fixtures, unseen questions: ordinary", False),
        ("trained", "not held out: training edge cases (no golden for SFT; GRPO trained on them with rewards)", True)]
# The goal's measure, then the same difference per set: the unseen schema and the unseen questions on the
# training schemas fail for different reasons, and the training edge cases show what GRPO learned at all.
GOALS = [("*", "every held-out edge case"), ("handwritten", "the hand-written edge cases"),
         ("library", "the library fixture's edge cases"), ("unseen", "unseen questions' edge cases on the training fixtures"),
         ("trained", "the training edge cases (not held out)")]
GRPO_KEYS = ("max_steps", "per_device_train_batch_size", "num_generations", "learning_rate", "lr_scheduler_type",
             "warmup_steps", "temperature", "max_completion_length", "max_tool_calling_iterations")


def pooled(rep: dict, set_: str, edge: "bool | None") -> tuple:
    """success, self-correction (with counts) over one set's categories of one kind ("*": every held-out set)."""
    def is_edge(c: str) -> bool:  # every hand-written task is an edge case
        return c.split("/")[0] == "handwritten" or c.split("/", 1)[1] in EDGE
    cats = [m for c, m in rep["categories"].items()
            if (c.split("/")[0] in HELD_OUT if set_ == "*" else set_ == c.split("/")[0])
            and (edge is None or is_edge(c) == edge)]
    n = sum(m["n_trajectories"] for m in cats)
    ok = sum(m["n_succeeded"] for m in cats)
    sb = sum(m["n_setback"] for m in cats)
    sc = sum(m["n_self_corrected"] for m in cats)
    return (ok / n if n else float("nan")), (sc / sb if sb else float("nan")), ok, n, sc, sb


def fmt(xs: list) -> str:
    """mean ± sample std; NaN and None (eval's JSON for a rate with no denominator: no calls made) left out."""
    xs = [x for x in xs if x is not None and x == x]
    if not xs:
        return "-"
    if len(xs) == 1:
        return f"{xs[0]:.3f}"
    return f"{statistics.mean(xs):.3f} ± {statistics.stdev(xs):.3f}"


def succeeded(c: dict) -> bool:
    """every assertion held: execution (or assertions) 1, else a verifiable reward of 1."""
    r = c.get("rewards") or {}
    for name in ("execution", "assertions", "verifiable"):
        if name in r:
            return r[name] >= 0.999
    return c["reward"] >= 0.999


def well_formed(call: dict) -> bool:
    """the call parsed and names a tool."""
    return not call.get("parse_error") and bool(call.get("name"))


def is_setback(call: dict) -> bool:
    """the call failed, was malformed or came back empty."""
    return bool(call.get("is_error") or call.get("parse_error") or "(0 rows)" in str(call.get("result", "")))


def retried(c: dict) -> bool:
    """a well-formed tool call came after a failed, malformed or empty one (a recovery attempt)."""
    setback = False
    for t in c["turns"]:
        for call in t.get("calls") or []:
            if setback and well_formed(call):
                return True
            if is_setback(call):
                setback = True
    return False


def setback_of(c: dict) -> bool:
    """a call failed, was malformed or came back empty (retried's setback)."""
    return any(is_setback(call) for t in c["turns"] for call in t.get("calls") or [])


@functools.cache
def held_out_trajectories(out: str, seed: str, model: str) -> "list | None":
    """The held-out trajectories of a model's evaluation (its trajectories.jsonl), read once; None without it."""
    try:
        lines = open(f"{out}/seed-{seed}/eval-{model}/trajectories.jsonl").readlines()
    except OSError:
        return None
    return [c for c in map(json.loads, lines) if c.get("category", "").split("/")[0] in HELD_OUT]


def eval_retries(out: str, seed: str, model: str) -> "tuple | None":
    """(retried, setbacks): held-out trajectories of a model's evaluation that met a setback, and of those the ones
    that made a well-formed call after it (whether or not it recovered)."""
    cs = held_out_trajectories(out, seed, model)
    if cs is None:
        return None
    cs = [c for c in cs if setback_of(c)]
    return sum(retried(c) for c in cs), len(cs)


def eval_unanswered(out: str, seed: str, model: str) -> "tuple | None":
    """(unanswered, succeeded): a model's held-out successes, and of those the ones that ended without an answer
    (cut off, or no text after the last call): a SQL oracle holds when any result had its rows, answer or not."""
    cs = held_out_trajectories(out, seed, model)
    if cs is None:
        return None
    cs = [c for c in cs if c.get("success")]
    return sum(not (c.get("answer") or "").strip() for c in cs), len(cs)


def setback_end(c: dict) -> str:
    """How a trajectory that met a setback ended: "corrected" (it succeeded), "answered" (no well-formed call after
    the setback, an answer), "stopped" (neither), "repeated" (its next well-formed call was the failed one again,
    the same tool and arguments) or "changed" (another call; both failed)."""
    if c.get("success"):
        return "corrected"
    failed = None
    for t in c["turns"]:
        for call in t.get("calls") or []:
            if failed is not None and well_formed(call):
                same = (call.get("name"), call.get("arguments")) == (failed.get("name"), failed.get("arguments"))
                return "repeated" if same else "changed"
            if failed is None and is_setback(call):
                failed = call
    return "answered" if (c.get("answer") or "").strip() else "stopped"


SETBACK_ENDS = ("corrected", "answered", "stopped", "repeated", "changed")


def setback_ends(out: str, seed: str, model: str) -> "collections.Counter | None":
    """setback_end of every held-out trajectory of a model's evaluation that met a setback."""
    cs = held_out_trajectories(out, seed, model)
    if cs is None:
        return None
    return collections.Counter(setback_end(c) for c in cs if setback_of(c))


# The looks recovery_forced_look forces (look.After), as the first turn of a forced continuation: how runs made
# before completions.jsonl had branch_forced_look tell them from a forced opener the policy completed.
FORCED_LOOK = re.compile(
    r'<tool_call>\n\{"name": "query_database", "arguments": \{"sql":"(?:'
    r"SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    r"|SELECT table_name FROM information_schema\.tables WHERE table_schema = current_schema\(\) ORDER BY table_name"
    r'|SELECT \* FROM (?:\\"[^"\\]*\\"|\w+) LIMIT [13]'
    r'|SELECT DISTINCT (\S+) FROM (?:\\"[^"\\]*\\"|\w+) ORDER BY \1(?: LIMIT \d+)?)"\}\}\n</tool_call>')


def branch_kind(c: dict, looks: bool) -> str:
    """free, forced (the tool-call opener) or look (a whole forced look; looks: the run forced them)."""
    if not c.get("branch_forced"):
        return "free"
    own = c["turns"][c.get("branch_turn", 0):]
    if c.get("branch_forced_look") or (looks and own and FORCED_LOOK.fullmatch(own[0].get("text", ""))):
        return "look"
    return "forced"


def branches(out: str, seeds: list, w_steps: int) -> None:
    """Recovery branching's continuations (completions.jsonl records with branch_of) per window of steps,
    forced (branch_forced: made to retry; a forced look apart) and free apart: how many, how many called a tool
    again in their own turns (a well-formed call; after a forced look, one of the policy's own), how many
    succeeded."""
    rows = []
    any_look = False
    for s in seeds:
        win = collections.defaultdict(collections.Counter)
        try:
            looks = "recovery_forced_look: true" in open(f"{out}/seed-{s}/grpo.yaml").read()
        except OSError:
            looks = False
        try:
            for l in open(f"{out}/seed-{s}/grpo/completions.jsonl"):
                c = json.loads(l)
                if c.get("branch_of") is None:
                    continue
                kind = branch_kind(c, looks)
                any_look = any_look or kind == "look"
                w = win[((c["step"] - 1) // w_steps, kind)]
                own = c["turns"][c.get("branch_turn", 0):]
                if kind == "look":
                    own = own[1:]
                w["n"] += 1
                w["called"] += any(well_formed(k) for t in own for k in t.get("calls") or [])
                w["ok"] += succeeded(c)
        except OSError:
            continue
        # recovery_forced_opener_loss logs the policy's probability of the opener at the forced setbacks
        opener = collections.defaultdict(list)
        try:
            for l in open(f"{out}/seed-{s}/grpo/metrics.jsonl"):
                m = json.loads(l)
                p = m.get("recovery/forced_opener_prob")
                if isinstance(p, (int, float)) and p == p and "step" in m:
                    opener[(m["step"] - 1) // w_steps].append(p)
        except OSError:
            pass
        for i in sorted({i for i, _ in win}):
            cells = []
            for kind in ("forced", "look", "free"):
                w = win[(i, kind)]
                cells += [str(w["n"]), str(w["called"]), str(w["ok"])]
            ps = opener.get(i)
            cells.append(f"{sum(ps) / len(ps):.3f}" if ps else "-")
            rows.append(f"| {s} | {i * w_steps + 1}-{i * w_steps + w_steps} | " + " | ".join(cells) + " |")
    if not rows:
        return
    if not any_look:  # the table as before forced looks
        rows = [re.sub(r"^((?:\|[^|]*){5})(?:\|[^|]*){3}", r"\1", r) for r in rows]
    print(f"Recovery branches per {w_steps} steps: continuations from a setback, made to retry (forced: the first turn "
          "starts with the tool-call opener" + ("; look: it is a whole look, recovery_forced_look" if any_look else "") +
          ") or sampled freely; how many called a tool again" + (" (after a look, the policy's own call)" if any_look else "") +
          "; how many succeeded; the policy's mean probability of starting a call itself at the forced setbacks "
          "(recovery/forced_opener_prob, logged when the opener trains" + ("; of the whole look where looks are forced" if any_look else "") + ").")
    print()
    look_head = "| look | called again | succeeded " if any_look else ""
    print("| seed | steps | forced | called again | succeeded " + look_head + "| free | called again | succeeded | P(opener) |")
    print("|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if any_look else ""))
    print("\n".join(rows))
    print()


@functools.cache
def report(out: str, seed: str, model: str) -> "dict | None":
    """OUT/seed-SEED/eval-MODEL.json (mcprl eval --json), read once; None where missing or unreadable."""
    try:
        with open(f"{out}/seed-{seed}/eval-{model}.json") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def models(out: str, seeds: list) -> list:
    """MODELS, with GRPO's evaluated checkpoints (eval-grpo-STEP.json of any seed) before its final model."""
    steps = set()
    for s in seeds:
        for f in glob.glob(f"{out}/seed-{s}/eval-grpo-*.json"):
            m = re.search(r"eval-grpo-(\d+)\.json$", f)
            if m:
                steps.add(int(m[1]))
    return MODELS[:-1] + [(f"grpo-{n}", f"SFT + GRPO, step {n}") for n in sorted(steps)] + MODELS[-1:]


def main(out: str, seeds: list) -> None:
    all_models = models(out, seeds)
    try:
        init = open(f"{out}/seed-{seeds[0]}/init.log").read()
        size = re.search(r"(\d+) parameters(?: \(([^)]*)\)|; ([^\n]*))", init)  # model init's "(...)", model info's "; ..."
        print(f"Model: {int(size[1]):,} parameters ({size[2] or size[3]}).")
    except (OSError, TypeError):
        print("Model: unknown (no init.log).")
    try:
        keys = {}
        for line in open(f"{out}/seed-{seeds[0]}/grpo.yaml"):
            m = re.match(r"^(\w+):\s*(\S[^#]*?)\s*(#.*)?$", line)
            if m and m[1] in GRPO_KEYS:
                keys[m[1]] = m[2]
        print("GRPO: " + ", ".join(f"{k} {v}" for k, v in keys.items()) + ".")
    except OSError:
        pass
    print()
    print(f"Seeds: {', '.join(seeds)}. Cells: mean ± sample standard deviation over seeds; per seed: success "
          "(succeeded/trajectories), self-correction (corrected/setbacks).")
    print()
    print("| held-out tasks | model | success rate | self-correction rate | per seed |")
    print("|---|---|---|---|---|")
    for set_, label, edge in SETS:
        for m, name in all_models:
            succ, corr, per = [], [], []
            for s in seeds:
                rep = report(out, s, m)
                if rep is None:
                    per.append(f"{s}: missing")
                    continue
                a, c, ok, n, sc, sb = pooled(rep, set_, edge)
                succ.append(a)
                corr.append(c)
                per.append(f"{s}: {ok}/{n}, {sc}/{sb}")
            print(f"| {label} | {name} | {fmt(succ)} | {fmt(corr)} | {'; '.join(per)} |")
    print()
    # How each model behaves over every held-out task: malformed calls, and calls per trajectory (1.0 means it
    # never tries a second query, whatever the first returned).
    # Retried: of the held-out trajectories that met a setback, those that called a tool again (well-formed) after
    # it: whether the policy tries to recover at all, which self-correction needs first.
    # Unanswered: held-out successes that ended without an answer (the oracle's rows in some result, no answer).
    print("| every held-out task | model | format error rate | tool calls per trajectory | setbacks self-corrected "
          "| held-out setbacks retried | held-out successes without an answer |")
    print("|---|---|---|---|---|---|---|")
    for m, name in all_models:
        fe, calls, per, rt, rper, uper = [], [], [], [], [], []
        for s in seeds:
            rep = report(out, s, m)
            if rep is None:
                continue
            fe.append(rep["format_error_rate"])
            calls.append(rep["n_calls"] / rep["n_trajectories"])
            per.append(f"{s}: {rep['n_self_corrected']}/{rep['n_setback']}")
            r = eval_retries(out, s, m)
            if r is not None and r[1]:
                rt.append(r[0] / r[1])
                rper.append(f"{s}: {r[0]}/{r[1]}")
            u = eval_unanswered(out, s, m)
            if u is not None:
                uper.append(f"{s}: {u[0]}/{u[1]}")
        print(f"| all | {name} | {fmt(fe)} | {fmt(calls)} | {'; '.join(per)} | {fmt(rt)} ({'; '.join(rper)}) "
              f"| {'; '.join(uper)} |")
    print()
    # How the held-out setbacks ended: a policy that repeats the call that failed, or answers at once, explores no
    # recovery; one that changes its call and still fails needs a better second query (a look, for instance).
    print("| held-out trajectories with a setback | model | " + " | ".join(
        ("succeeded", "answered, no call after it", "no call after it, no answer",
         "repeated the failed call", "another call, failed")) + " |")
    print("|---|---|---|---|---|---|---|")
    for m, name in all_models:
        ends = collections.Counter()
        for s in seeds:
            e = setback_ends(out, s, m)
            if e is not None:
                ends += e
        n = sum(ends.values())
        if n:
            print(f"| {n} (seeds pooled) | {name} | " + " | ".join(f"{ends[k]} ({ends[k] / n:.2f})" for k in SETBACK_ENDS) + " |")
    print()
    # The goal: GRPO's success on the held-out edge cases at least 30 points above SFT's, self-correction up.
    # For GRPO's evaluated checkpoints, the success rates alone, after the final model's lines.
    rates = (("success rate", 0), ("self-correction rate", 1))
    goal_lines = [("grpo", "", rates)]
    goal_lines += [(m, f", GRPO at step {m[5:]}", rates[:1]) for m, _ in all_models if m.startswith("grpo-")]
    for gm, at, whats in goal_lines:
        for set_, label in GOALS:
            for what, idx in whats:
                diffs, per = [], []
                for s in seeds:
                    g, f = report(out, s, gm), report(out, s, "sft")
                    if g is None or f is None:
                        continue
                    g, f = pooled(g, set_, True), pooled(f, set_, True)
                    d = 100 * (g[idx] - f[idx])
                    if d == d:
                        diffs.append(d)
                        per.append(f"{s}: {d:+.1f}")
                if diffs:
                    spread = f" ± {statistics.stdev(diffs):.1f}" if len(diffs) > 1 else ""
                    print(f"GRPO minus SFT, {what} on {label}{at}: {statistics.mean(diffs):+.1f}{spread} points "
                          f"(per seed {', '.join(per)}).")
    # GRPO's training reward: first and last 10 logged steps.
    for s in seeds:
        try:
            recs = [json.loads(l) for l in open(f"{out}/seed-{s}/grpo/metrics.jsonl")]
        except OSError:
            continue
        r = [x["reward"] for x in recs if "reward" in x]
        if r:
            k = min(10, len(r))
            print(f"seed {s}: GRPO training reward, first {k} steps {statistics.mean(r[:k]):.3f}, "
                  f"last {k} steps {statistics.mean(r[-k:]):.3f} ({len(r)} steps)")
        gen = [x["timing/generation_seconds"] for x in recs if "timing/generation_seconds" in x]
        opt = [x["timing/optimizer_step_seconds"] for x in recs if "timing/optimizer_step_seconds" in x]
        if gen and opt:  # logged since commit 86df2ff
            print(f"seed {s}: GRPO's time a step, generation batch (rollouts, branches, rewards) {statistics.mean(gen):.1f} s "
                  f"(range {min(gen):.1f}-{max(gen):.1f}), optimizer step {statistics.mean(opt):.1f} s "
                  f"(range {min(opt):.1f}-{max(opt):.1f})")
    print()
    # GRPO's sampled training groups (completions.jsonl), edge cases and ordinary tasks apart, in windows of
    # steps: how often a trajectory succeeded (every assertion held), retried (a well-formed call after a
    # failed, malformed or empty one), and both; and how many groups had no reward spread (no advantage,
    # nothing learned from them).
    w_steps = 10
    print(f"GRPO's training samples per {w_steps} steps: trajectories that succeeded / retried (a well-formed call "
          "after a failed, malformed or empty one) / both; groups whose rewards were all equal.")
    print()
    print("| seed | steps | edge cases: succeeded | retried | both | equal-reward groups | ordinary: succeeded "
          "| retried | both | equal-reward groups |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in seeds:
        groups = collections.defaultdict(list)
        try:
            for l in open(f"{out}/seed-{s}/grpo/completions.jsonl"):
                c = json.loads(l)
                if c.get("branch_of") is None:  # a root (branches are in the table below)
                    groups[(c["step"], c["group"])].append(c)
        except OSError:
            continue
        win = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
        for (step, _), cs in groups.items():
            w = win[(step - 1) // w_steps]["edge" if cs[0].get("category") in EDGE else "ordinary"]
            rs = [c["reward"] for c in cs]
            w["groups"] += 1
            w["equal"] += max(rs) - min(rs) < 1e-9
            for c in cs:
                multi = retried(c)
                ok = succeeded(c)
                w["n"] += 1
                w["ok"] += ok
                w["multi"] += multi
                w["both"] += multi and ok
        for i in sorted(win):
            cells = []
            for kind in ("edge", "ordinary"):
                w = win[i][kind]
                cells += [f"{w['ok']}/{w['n']}", str(w["multi"]), str(w["both"]), f"{w['equal']}/{w['groups']}"]
            print(f"| {s} | {i * w_steps + 1}-{i * w_steps + w_steps} | " + " | ".join(cells) + " |")
    print()
    branches(out, seeds, w_steps)
    print("| phase | seconds | load average at start, end |")
    print("|---|---|---|")
    try:
        for l in open(f"{out}/times.tsv"):
            name, secs, l0, l1 = l.rstrip("\n").split("\t")
            print(f"| {name} | {secs} | {l0}, {l1} |")
    except OSError:
        pass
    print()
    try:
        loads = [float(l.split("\t")[1]) for l in open(f"{out}/load.tsv")]
    except OSError:
        loads = []
    if loads:
        print(f"Load average (1 min) over the run, sampled every 30 s: min {min(loads):.1f}, "
              f"mean {statistics.mean(loads):.1f}, max {max(loads):.1f} (2 cores).")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: experiment-results.py OUT SEED...")
    main(sys.argv[1], sys.argv[2:])
