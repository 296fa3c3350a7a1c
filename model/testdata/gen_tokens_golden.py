"""peft adapters with trainable tokens on the tiny GGUF models and their logits, for model/tokens_test.go.

For tiny-llama.gguf (tied embeddings) and tiny-qwen2.gguf (untied), loaded with transformers from the GGUF file
(the weights `mcprl model import` writes), peft 0.21.2 attaches LoraConfig(trainable_token_indices=IDS) with a
LoRA adapter on q_proj (init_lora_weights=False), gives the trainable rows random values, and saves the adapter
as tokens-ARCH/ (adapter_config.json, adapter_model.safetensors). tokens_golden.safetensors holds, per model,
"ARCH.logits" [B, T, V]: the PeftModel's logits on tiny_gguf_golden.json's batch (float32, eager attention),
whose tokens include the listed ids, and "ARCH.rounding", the float64 logits less these float32 ones (float32, as
the file holds no float64): peft's own float32 rounding, which the Go test allows for.

Run from this directory: python gen_tokens_golden.py   (torch 2.15.0, transformers 5.23.0, peft 0.21.2, gguf 0.19.0)
"""
import json
import os

import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

torch.manual_seed(13)
g = json.load(open("tiny_gguf_golden.json"))
tt, mm = torch.tensor(g["tokens"]), torch.tensor(g["attention_mask"])
pos = (mm.cumsum(-1) - 1).clamp(min=0)


def float64_logits(m):
    """m's logits on the batch in float64, each row alone without its padding (padding makes NaN in float64:
    0 * NaN in probs @ v); m is left in float64."""
    m.double()
    out = torch.zeros(tuple(mm.shape) + (m.config.vocab_size,), dtype=torch.float64)
    with torch.no_grad():
        for b in range(mm.shape[0]):
            keep = mm[b].bool()
            out[b, keep] = m(input_ids=tt[b, keep][None]).logits[0]
    return out

ids = sorted({int(t) for t in g["tokens"][0][:3]})  # three ids the batch holds
out = {}
for arch in ("llama", "qwen2"):
    base = AutoModelForCausalLM.from_pretrained(".", gguf_file=f"tiny-{arch}.gguf", dtype=torch.float32,
                                                attn_implementation="eager").eval()
    cfg = LoraConfig(r=2, lora_alpha=4, lora_dropout=0.0, init_lora_weights=False, task_type="CAUSAL_LM",
                     target_modules=["q_proj"], trainable_token_indices=ids)
    model = get_peft_model(base, cfg).eval()
    for n, p in model.named_parameters():
        if "lora_B" in n:
            torch.nn.init.normal_(p, std=0.2)
        if "trainable_tokens_delta" in n:
            torch.nn.init.normal_(p, std=0.5)
    with torch.no_grad():
        logits = model(input_ids=tt, attention_mask=mm, position_ids=pos).logits
    model.save_pretrained(f"tokens-{arch}")
    os.remove(f"tokens-{arch}/README.md")  # peft's model card
    print(arch, "tied", base.config.tie_word_embeddings, "ids", ids)
    out[f"{arch}.logits"] = logits.contiguous()
    logits64 = float64_logits(model)
    out[f"{arch}.rounding"] = (logits64 - logits.double()).float().contiguous()
save_file(out, "tokens_golden.safetensors")
