#!/usr/bin/env python3
"""Generates extra_renders.json: chat-template renders made by Python Jinja2 with the settings that Hugging Face
transformers uses in apply_chat_template (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols, tojson = json.dumps(ensure_ascii=False), raise_exception, bos/eos/pad/unk tokens passed).

Run from tokenizer/testdata/parity:  python3 gen_extra_renders.py   (jinja2 3.1.6 was used)
"""
import json
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def env():
    e = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    e.filters["tojson"] = tojson
    e.globals["raise_exception"] = raise_exception
    e.globals["strftime_now"] = lambda f: datetime.now().strftime(f)
    return e


cfg = json.load(open("../qwen2.5/tokenizer_config.json"))
# "custom" exercises tojson's keyword arguments, which the Qwen templates do not use.
custom = """{%- for m in messages %}{%- for c in m.tool_calls or [] %}
{{ c.function.arguments | tojson(indent=2) }}
{{ c.function.arguments | tojson(separators=[',', ':']) }}
{{ c.function.arguments | tojson(sort_keys=true) }}
{{ c.function.arguments | tojson(ensure_ascii=true) }}
{%- endfor %}{%- endfor %}
{{ tools | tojson }}"""
templates = {
    "qwen2.5": cfg["chat_template"],
    "qwen3": open("../qwen3_chat_template.jinja").read(),
    "custom": custom,
}
special = {"bos_token": None, "eos_token": cfg["eos_token"], "pad_token": cfg["pad_token"], "unk_token": None}

tools = [
    {"type": "function", "function": {"name": "query_database",
     "description": "Run a read-only SQL query against the database. Use <, > & quotes \"freely\".",
     "parameters": {"type": "object", "properties": {"sql": {"type": "string", "description": "SQL statement"},
                    "max_rows": {"type": "integer", "minimum": 1, "default": 100}}, "required": ["sql"]}}},
    {"type": "function", "function": {"name": "run_linter", "description": "Lint a file of the workspace; naïve → ünïcode.",
     "parameters": {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"},
                    "strict": {"type": "boolean"}, "ratio": {"type": "number", "default": 0.0, "minimum": 1.5e-5, "maximum": 1e6}}}}},
]


def call(name, args):
    return {"type": "function", "function": {"name": name, "arguments": args}}


conversations = {
    "system_two_calls": [
        {"role": "system", "content": "You are an MCP agent. Answer in one sentence."},
        {"role": "user", "content": "Find all inactive customers — and lint src/app.py."},
        {"role": "assistant", "content": "I'll check both.", "tool_calls": [
            call("query_database", {"sql": "SELECT id, name FROM customers WHERE status = 'inactive' AND age > 30", "max_rows": 50}),
            call("run_linter", {"path": "src/app.py", "strict": True, "ratio": 0.5})]},
        {"role": "tool", "content": "[[3, \"Zoë\"], [7, \"Ann\"]]"},
        {"role": "tool", "content": "exit_code: 0\nno issues"},
        {"role": "assistant", "content": "Two inactive customers (Zoë, Ann); the linter is clean."},
        {"role": "user", "content": "Thanks! 日本語で?"},
    ],
    "unordered_args": [
        {"role": "user", "content": "Query it."},
        {"role": "assistant", "content": "", "tool_calls": [
            call("query_database", {"zeta": 1, "sql": "SELECT 1", "alpha": {"y": [1, 2, {"b": None, "a": False}], "x": "é<&>"}})]},
        {"role": "tool", "content": "[[1]]"},
    ],
    "json_edge_cases": [
        {"role": "user", "content": "Edge cases."},
        {"role": "assistant", "content": "", "tool_calls": [
            call("query_database", {"one": 1.0, "big": 1234567.5, "tiny": 1e-7, "huge": 1e16, "tenth": 0.1, "negzero": -0.0,
                                    "hundred": 100.0, "int": 9007199254740993, "neg": -42, "exp": 2.5e+20,
                                    "seps": "line\u2028para\u2029 del\x7f nul\x00 bell\x07 tab\t \"q\" back\\slash",
                                    "emoji": "😀 日本 é", "empty_list": [], "empty_obj": {}, "nested": [[], [{}], [1.5, None, True]]})]},
        {"role": "tool", "content": "ok"},
    ],
    "string_args": [
        {"role": "user", "content": "Lint it."},
        {"role": "assistant", "content": "", "tool_calls": [call("run_linter", "{\"path\": \"a.py\"}")]},
    ],
    "thinking_history": [
        {"role": "user", "content": "How many rows?"},
        {"role": "assistant", "content": "<think>\nI should count.\n</think>\n\nLet me count.", "tool_calls": [
            call("query_database", {"sql": "SELECT COUNT(*) FROM t"})]},
        {"role": "tool", "content": "[[42]]"},
        {"role": "assistant", "content": "<think>\nIt said 42.\n</think>\n\nThere are 42 rows."},
        {"role": "user", "content": "And now?"},
    ],
}

cases = []
for tname, src in templates.items():
    tmpl = env().from_string(src)
    for cname, messages in conversations.items():
        for with_tools in (True, False):
            for gen in (False, True):
                kwargs = dict(special)
                kwargs.update(messages=messages, tools=tools if with_tools else None, add_generation_prompt=gen)
                cases.append({"template": tname, "conversation": cname, "tools": with_tools,
                              "add_generation_prompt": gen, "vars": {}, "rendered": tmpl.render(**kwargs)})
    if tname == "qwen3":
        for think in (False, True):
            kwargs = dict(special)
            kwargs.update(messages=conversations["thinking_history"], tools=None, add_generation_prompt=True,
                          enable_thinking=think)
            cases.append({"template": tname, "conversation": "thinking_history", "tools": False,
                          "add_generation_prompt": True, "vars": {"enable_thinking": think},
                          "rendered": tmpl.render(**kwargs)})

out = {"how": __doc__.strip(), "custom_template": custom, "tools": tools, "conversations": conversations, "cases": cases}
with open("extra_renders.json", "w", encoding="utf-8") as f:
    json.dump(out, f, ensure_ascii=False, indent=1)
    f.write("\n")
print(len(cases), "renders")
