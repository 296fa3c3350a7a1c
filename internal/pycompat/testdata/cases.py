#!/usr/bin/env python3
"""Prints JSONL test cases for package pycompat, computed by this CPython:
{"s": S, "lower": S.lower(), "strip": S.strip(), "loads": "dict"|"list"|...|"JSONDecodeError"|"ValueError"|"RecursionError"}
for random strings mixing ASCII, whitespace, case-special characters and JSON fragments. Deterministic."""
import json
import random
import sys

rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
ALPHA = (list("aZ iI09.'\":,{}[]-+eE\\/ntfu") + ["\u03a3", "\u03c3", "\u0130", "\u0131", "\u00df", "\u1e9e", "\u212a",
         "\u0345", "\u0307", "\u00ad", "\u2019", "\u02b0", "\u1fbc", "\u01c5", "\u00a0", "\u3000", "\x1c", "\x85",
         "\u2028", "\u200b", "\ufeff", "\u180e", "\U0001d400", "\U0001e900", "\u10a0", "\u13a0", "\uab70", "\u2c2f",
         "\ua7c0", "\u1c90", "\x0b", "\t", "\n", "\r", "\x00", "\x7f", "\ud800", "\udfff"])
FRAGS = ['{"a": ', '[', ']', '}', 'NaN', 'Infinity', '-Infinity', '1e5', '01', '"\\ud800"', '"\\ud83d\\ude00"',
         '"\\u00e9"', 'null', 'true', 'false', ', ', '"x"', '1' * 4301, '-', '1.', '"\\q"', '"\\u12"']

def rand_string():
    n = rng.randrange(0, 24)
    parts = []
    for _ in range(n):
        parts.append(rng.choice(FRAGS) if rng.random() < 0.3 else rng.choice(ALPHA))
    return "".join(parts)

def loads_class(s):
    try:
        return type(json.loads(s)).__name__
    except Exception as e:
        return type(e).__name__

cases = [rand_string() for _ in range(3000)]
cases += ["\u03a3", "A\u03a3", "A\u03a3B", "A\u03a3.", "A\u0345\u03a3", "A\u03a3\u0345B", "1\u03a3", "\u03a3\u03a3", "A'\u03a3'",
          "\u0130", "\u1fbc\u03a3", "\u01c5\u03a3", "A\u00ad\u03a3\u00adb", "{" * 993 + "}" * 993, "[" * 994 + "]" * 994]
for s in cases:
    print(json.dumps({"s": s, "lower": s.lower(), "strip": s.strip(), "loads": loads_class(s)}))
