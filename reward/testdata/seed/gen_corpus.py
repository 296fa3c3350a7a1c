#!/usr/bin/env python3
"""Generates completions for the seed reward's parity test and benchmark.

  gen_corpus.py parity        > corpus.jsonl   (hand-written adversarial cases + 400 random ones)
  gen_corpus.py bench N       > bench.jsonl    (N realistic completions none of which makes
                                                the Python function raise, so it can score them in one batch)

Output lines are {"task_id": "seed", "completion": TEXT} written with
json.dumps (ASCII, lone surrogates as \\uD800 escapes). Deterministic.
"""
import json
import random
import sys

Q, L = "query_database", "run_linter"


def call(obj_text, pre="", post="", ws_in="", ws_out=""):
    return pre + "<tool_call>" + ws_in + obj_text + ws_out + "</tool_call>" + post


def q(sql):
    return json.dumps({"name": Q, "arguments": {"sql": sql}})


HAND = [
    # no tag, half tags, wrong case
    "", "I cannot help with that.", "<tool_call>", "</tool_call>", "</tool_call><tool_call>",
    "<tool_call>" + q("SELECT 1 WHERE status='inactive'"),
    q("SELECT * FROM customers WHERE status = 'inactive'"),
    "<TOOL_CALL>" + q("inactive") + "</TOOL_CALL>", "<tool_call >" + q("inactive") + "</tool_call>",
    "<tool_call>" + q("inactive") + "</tool_call >",
    # the user's happy paths
    call(q("SELECT * FROM customers WHERE status = 'inactive'")),
    call(q("SELECT * FROM customers WHERE status = 'INACTIVE'"), "Let me check.\n", "\nDone."),
    call(q("SELECT COUNT(*) FROM customers"), ws_in="\n", ws_out="\n"),
    call(json.dumps({"name": L, "arguments": {"path": "schema.sql"}})),
    call(json.dumps({"name": L, "arguments": {"sql": "inactive"}})),
    call(json.dumps({"name": "drop_table", "arguments": {"sql": "inactive"}})),
    call(json.dumps({"name": "Query_Database", "arguments": {"sql": "inactive"}})),
    call(json.dumps({"name": " query_database", "arguments": {"sql": "inactive"}})),
    call('{"name": "query\\u005fdatabase", "arguments": {"sql": "in\\u0061ctive"}}'),
    call('{"name":"query_database","arguments":{"sql":"inactive"}}'),
    # first match only: a bad first call hides a good second one, and vice versa
    call("{bad json}") + call(q("inactive")),
    call(q("inactive")) + call("{bad json}"),
    "<tool_call>oops<tool_call>" + q("inactive") + "</tool_call>",
    "<tool_call>" + q("inactive") + "</tool_call></tool_call>",
    "<tool_call></tool_call>" + call(q("inactive")),
    "<tool_call><tool_call></tool_call>",
    # empty and whitespace-only bodies
    call(""), call("   \n\t "), call("\u3000"),
    # str.strip's Unicode whitespace (Python strips it, JSON would not accept it)
    call(q("inactive"), ws_in="\u00a0\u2003\u3000\x1c\x1d\x1e\x1f\x85\u2028\u2029\u202f\u205f\u1680\x0b\x0c", ws_out="\u200a\u00a0\r\n"),
    call(q("inactive"), ws_in="\u200b"),  # zero-width space is not whitespace
    call(q("inactive"), ws_in="\ufeff"),  # BOM: not stripped, json.loads rejects it
    call(q("inactive"), ws_out="\u180e"),  # U+180E is not whitespace in Unicode 14
    # whitespace inside the JSON: only space, tab, newline, carriage return
    call('{"name":\t"query_database",\r\n"arguments" : {"sql" : "inactive"} }'),
    call('{"name":\x0b"query_database","arguments":{"sql":"inactive"}}'),
    call('{"name":\u00a0"query_database","arguments":{"sql":"inactive"}}'),
    call('{"name":\x0c"run_linter"}'),
    # json.loads extensions and strictness
    call('{"name": "query_database", "arguments": {"sql": "inactive", "limit": NaN}}'),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "x": [Infinity, -Infinity]}}'),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "x": nan}}'),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "x": -NaN}}'),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "x": infinity}}'),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "x": +1}}'),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "x": 01}}'),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "x": 1.}}'),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "x": .5}}'),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "x": -0}}'),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "x": 1e5, "y": 1E-5, "z": 1e+5, "w": -0.0e0}}'),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "x": 1e}}'),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "x": 1e999}}'),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "x": -}}'),
    call('{"name": "query_database", "arguments": {"sql": "inactive",}}'),
    call('{"name": "query_database", "arguments": {"sql": "inactive"},}'),
    call("{'name': 'query_database', 'arguments': {'sql': 'inactive'}}"),
    call('{"name": "query_database", /* c */ "arguments": {"sql": "inactive"}}'),
    call('{name: "query_database"}'),
    call('{"name": "query_database", "arguments": {"sql": "inactive"}} trailing'),
    call('{"name": "query_database", "arguments": {"sql": "inactive"}} {}'),
    call('{"name": "query_database", "arguments": {"sql": "inactive"}}}'),
    call('{"name": "query_database", "arguments": {"sql": "in\tactive"}}'),  # raw tab in a string
    call('{"name": "query_database", "arguments": {"sql": "inactive\n"}}'),  # raw newline in a string
    call('{"name": "query_database", "arguments": {"sql": "inactive\x7f\x80\x9f"}}'),
    call('{"name": "query_database", "arguments": {"sql": "in\\x61ctive"}}'),
    call('{"name": "query_database", "arguments": {"sql": "\\u00C9INACTIVE\\u00e9"}}'),
    call('{"name": "query_database", "arguments": {"sql": "\\u12"}}'),
    call('{"name": "query_database", "arguments": {"sql": "\\u12G4"}}'),
    call('{"name": "query_database", "arguments": {"sql": "\\/inactive\\/\\b\\f\\r"}}'),
    call('{"name": "query_database", "arguments": {"sql": "inactive\\"}}'),
    call('{"name": "query_database", "arguments": {"sql": "inactive'),
    # duplicate keys: the last wins
    call('{"name": "drop_table", "name": "query_database", "arguments": {"sql": "inactive"}}'),
    call('{"name": "query_database", "name": "drop_table", "arguments": {"sql": "inactive"}}'),
    call('{"name": "query_database", "arguments": {"sql": "inactive"}, "arguments": {"sql": "active"}}'),
    call('{"name": "query_database", "arguments": {"sql": "active", "sql": "INACTIVE"}}'),
    call('{"name": "query_database", "arguments": [], "arguments": {"sql": "inactive"}}'),
    # lone and paired surrogates
    call('{"name": "query_database", "arguments": {"sql": "inactive \\ud800"}}'),
    call('{"name": "query_database", "arguments": {"sql": "\\udc00inactive\\ud83d\\ude00\\ud83d"}}'),
    call('{"name": "query_database\\ud800", "arguments": {"sql": "inactive"}}'),
    call('{"name": "query_database", "arguments": {"sql": "\\ud800\\u0041 inactive"}}'),
    call('{"name": "query_database", "arguments": {"sql": "\\ud800\\uzzzz inactive"}}'),
    call('{"name": "query_database", "arguments": {"sql": "\\ud800\\n inactive"}}'),
    "text \ud800 " + call(q("inactive")),
    call('{"name": "query_database", "arguments": {"sql": "inactive \ud800 raw"}}'),
    call('\ud800{"name": "query_database"}'),
    # Unicode lower(): special cases
    call(q("SELECT * WHERE s = '\u0130NACTIVE'")),   # U+0130 lowers to "i\u0307": no match
    call(q("SELECT * WHERE s = 'INACT\u0130VE'")),
    call(q("SELECT * WHERE s = '\u0131nactive'")),   # dotless i
    call(q("SELECT * WHERE s = 'INACTIVE\u03a3'")),
    call(q("SELECT * WHERE s = '\uff29\uff2e\uff21\uff23\uff34\uff29\uff36\uff25'")),  # fullwidth
    call(q("S\u1e9eINACTIVE\u212a")),
    # Python raises: mcprl's documented scores
    call("[]"), call('["query_database"]'), call('"query_database"'), call("42"), call("null"), call("true"),
    call("NaN"), call("-Infinity"), call("1.5"),
    call('{"name": "query_database", "arguments": []}'),
    call('{"name": "query_database", "arguments": "SELECT inactive"}'),
    call('{"name": "query_database", "arguments": null}'),
    call('{"name": "query_database", "arguments": 7}'),
    call('{"name": "query_database", "arguments": {"sql": 1}}'),
    call('{"name": "query_database", "arguments": {"sql": null}}'),
    call('{"name": "query_database", "arguments": {"sql": ["inactive"]}}'),
    call('{"name": "query_database", "arguments": {"sql": {"q": "inactive"}}}'),
    call('{"name": "query_database", "arguments": {"sql": true}}'),
    call('{"name": "run_linter", "arguments": []}'),      # not reached for run_linter: no raise
    call('{"name": "run_linter", "arguments": {"path": 1}}'),
    call('{"name": "query_database"}'),                   # default {}: no raise
    call('{"name": "query_database", "arguments": {}}'),
    call('{"name": "query_database", "arguments": {"path": "inactive"}}'),
    # odd names
    call('{"name": null, "arguments": {"sql": "inactive"}}'),
    call('{"name": 1, "arguments": {"sql": "inactive"}}'),
    call('{"name": ["query_database"], "arguments": {"sql": "inactive"}}'),
    call('{"name": {"n": "query_database"}, "arguments": {"sql": "inactive"}}'),
    call('{"arguments": {"sql": "inactive"}}'),
    call('{}'),
    call('{"name": ""}'),
    # big integers: 4300 digits decode, 4301 raise ValueError
    call('{"name": "query_database", "arguments": {"sql": "inactive", "n": ' + "9" * 4300 + "}}"),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "n": -' + "9" * 4300 + "}}"),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "n": ' + "9" * 4301 + "}}"),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "n": ' + "9" * 4301 + ".0}}"),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "n": 1' + "0" * 5000 + "e-5000}}"),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "n": ' + "9" * 4301 + "]}"),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "bad": x, "n": ' + "9" * 4301 + "}}"),
    # nesting: 993 levels decode, 994 raise RecursionError (this harness's stack depth)
    call('{"name": "query_database", "arguments": {"sql": "inactive", "x": ' + "[" * 991 + "]" * 991 + "}}"),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "x": ' + "[" * 992 + "]" * 992 + "}}"),
    call('{"name": "query_database", "arguments": {"sql": "inactive", "x": ' + '{"a":' * 992 + "1" + "}" * 992 + "}}"),
    call("[" * 100000),
    call("[" * 993 + "]" * 993),
    call("[" * 994 + "]" * 994),
    call("[" * 500 + "x"),
    # long text around the call
    "x" * 100000 + call(q("inactive")),
    call(q("inactive " + "y" * 50000)),
    "<tool_call>" * 2000 + q("inactive") + "</tool_call>",
]


def rand_text(rng, n):
    alphabet = "abc XYZ\n\t<>{}\"':,[]\\/ \u00e9\u0130\u03a3\u00a0\u3000\u200b\U0001F600"
    return "".join(rng.choice(alphabet) for _ in range(n))


def rand_sql(rng):
    word = rng.choice(["inactive", "INACTIVE", "InActive", "active", "in active", "inactiv", "\u0130nactive",
                       "deleted", "INACTIVE\u0307", "inactive\u03a3", "\u212aINACTIVE"])
    return rng.choice(["SELECT * FROM customers WHERE status = '%s'", "select count(*) from t where s='%s'",
                       "%s", "UPDATE c SET status='%s'", "-- %s\nSELECT 1"]) % word


def rand_obj(rng):
    name = rng.choice([Q, Q, Q, L, "lookup", "", None, 3, "query_database ", "QUERY_DATABASE"])
    obj = {}
    if rng.random() < 0.9:
        obj["name"] = name
    r = rng.random()
    if r < 0.7:
        args = {"sql": rand_sql(rng)}
        if rng.random() < 0.2:
            args["limit"] = rng.choice([10, 1.5, None, True, "x"])
        obj["arguments"] = args
    elif r < 0.8:
        obj["arguments"] = {"path": "schema.sql"}
    elif r < 0.85:
        obj["arguments"] = rng.choice([[], "x", None, 1, {"sql": 5}, {"sql": None}])
    text = json.dumps(obj, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, None, 2]))
    m = rng.random()
    if m < 0.08:
        i = rng.randrange(len(text) + 1)
        text = text[:i] + rng.choice(["}", ",", "\"", "NaN", "\x00", " ", "\u00a0"]) + text[i:]
    elif m < 0.12:
        text = text[: rng.randrange(len(text) + 1)]
    elif m < 0.15:
        text = text.replace(", ", ",\x0b", 1)
    return text


def rand_completion(rng):
    pre = rng.choice(["", "Let me query the database.\n", rand_text(rng, rng.randrange(40)), "<think>plan</think>\n"])
    post = rng.choice(["", "\n", " Done.", rand_text(rng, rng.randrange(20)), "</tool_call>"])
    ws = lambda: rng.choice(["", "\n", " ", "\u00a0", "\u3000\n", "\x1c", "\u200b", "\r\n"])
    body = rand_obj(rng)
    r = rng.random()
    if r < 0.05:
        return pre + body + post
    if r < 0.1:
        return pre + "<tool_call>" + ws() + body + post
    c = call(body, pre, post, ws(), ws())
    if rng.random() < 0.2:
        c += call(rand_obj(rng), "\n")
    return c


REALISTIC = [
    "I'll look up the inactive customers first.\n<tool_call>\n{\"name\": \"query_database\", \"arguments\": {\"sql\": \"SELECT id, name, email FROM customers WHERE status = 'inactive' ORDER BY id\"}}\n</tool_call>",
    "To verify schema integrity I will run the linter on the schema file.\n<tool_call>\n{\"name\": \"run_linter\", \"arguments\": {\"path\": \"schema.sql\"}}\n</tool_call>",
    "<tool_call>\n{\"name\": \"query_database\", \"arguments\": {\"sql\": \"SELECT COUNT(*) FROM customers WHERE status = 'INACTIVE'\"}}\n</tool_call>",
    "Let me check the table first.\n<tool_call>\n{\"name\": \"query_database\", \"arguments\": {\"sql\": \"SELECT * FROM customers LIMIT 5\"}}\n</tool_call>",
    "<tool_call>\n{\"name\": \"postgres_query\", \"arguments\": {\"query\": \"SELECT * FROM customers WHERE status = 'inactive'\"}}\n</tool_call>",
    "<tool_call>\n{\"name\": \"query_database\", \"arguments\": {\"sql\": \"SELECT * FROM customers WHERE status = 'inactive'\"}\n</tool_call>",
    "There are 3 inactive customers and the schema passes the linter.",
    "<tool_call>{'name': 'query_database', 'arguments': {'sql': \"SELECT * FROM customers WHERE status='inactive'\"}}</tool_call>",
]


def bench(n):
    rng = random.Random(50000)
    out = []
    for i in range(n):
        if rng.random() < 0.6:
            t = rng.choice(REALISTIC)
            if rng.random() < 0.5:
                t = "Thinking about the task: " + "find the records and check the schema. " * rng.randrange(1, 8) + "\n" + t
        else:
            while True:
                t = rand_completion(rng)
                if not raises(t):
                    break
        out.append(t)
    return out


def raises(t):
    import mcp_rl_reward
    try:
        mcp_rl_reward.compute_mcp_reward([t], None)
        return False
    except Exception:
        return True


def main():
    mode = sys.argv[1]
    if mode == "parity":
        rng = random.Random(20261202)
        texts = HAND + [rand_completion(rng) for _ in range(400)]
    elif mode == "bench":
        sys.path.insert(0, __file__.rsplit("/", 1)[0] if "/" in __file__ else ".")
        texts = bench(int(sys.argv[2]))
    else:
        sys.exit("usage: gen_corpus.py parity | bench N")
    w = sys.stdout.write
    for t in texts:
        w(json.dumps({"task_id": "seed", "completion": t}) + "\n")


if __name__ == "__main__":
    main()
