#!/usr/bin/env python3
"""Runs the user's compute_mcp_reward (mcp_rl_reward.py, unchanged) over a
JSONL file of {"completion": ...} lines.

  harness.py parity FILE [--keyword K] [--catalog a,b]
      one call per completion, exceptions caught: prints one JSON line per
      completion, {"reward": float} or {"error": "Class: message", "at": the
      source line of compute_mcp_reward that raised}.
  harness.py batch FILE
      one call over all completions (as TRL calls it); prints one JSON line
      per completion {"index": i, "reward": float}: the whole-process
      baseline of the `mcprl score --reward seed` benchmark.
"""
import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def load_function(keyword=None, catalog=None):
    path = os.path.join(HERE, "mcp_rl_reward.py")
    src = open(path, encoding="utf-8").read()
    if keyword is not None:
        src = src.replace('"inactive"', repr(keyword), 1)
    if catalog is not None:
        src = src.replace('["query_database", "run_linter"]', repr(catalog), 1)
    ns = {"__name__": "mcp_rl_reward"}
    exec(compile(src, path, "exec"), ns)
    return ns["compute_mcp_reward"]


def main():
    mode, file = sys.argv[1], sys.argv[2]
    keyword = catalog = None
    args = sys.argv[3:]
    while args:
        if args[0] == "--keyword":
            keyword = args[1]
        elif args[0] == "--catalog":
            catalog = args[1].split(",")
        args = args[2:]
    f = load_function(keyword, catalog)
    with open(file, encoding="utf-8") as fh:
        texts = [json.loads(line)["completion"] for line in fh if line.strip()]
    out = sys.stdout
    if mode == "parity":
        for t in texts:
            try:
                r = f([t], None)[0]
                out.write(json.dumps({"reward": r}) + "\n")
            except Exception as e:  # what TRL would crash on
                line = [f.line for f in traceback.extract_tb(e.__traceback__) if f.name == "compute_mcp_reward"][-1]
                out.write(json.dumps({"error": "%s: %s" % (type(e).__name__, e), "at": line}) + "\n")
    elif mode == "batch":
        rewards = f(texts, None)
        out.write("".join(json.dumps({"index": i, "reward": r}) + "\n" for i, r in enumerate(rewards)))
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
