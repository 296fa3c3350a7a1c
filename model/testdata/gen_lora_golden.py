"""peft LoRA adapters on the tiny GGUF models and their logits, for model/lora_test.go.

For tiny-llama.gguf and tiny-qwen2.gguf (gen_tiny_gguf.py), loaded with transformers from the GGUF file (the same
weights `mcprl model import` writes, as model/gguf_test.go checks), peft 0.21.2 attaches a LoRA adapter with
init_lora_weights=False (A and B random, so the adapter changes the logits) and saves it as lora-ARCH/
(adapter_config.json, adapter_model.safetensors). lora_golden.json holds, per model, the logits [B, T, V] of the
PeftModel on tiny_gguf_golden.json's batch (float32, eager attention) and those of merge_and_unload(), and both
computed in float64 from the same weights (logits64, merged_logits64): how far peft's own float32 is from them is
the rounding the Go test allows for.

Run from this directory: python gen_lora_golden.py   (torch 2.15.0, transformers 5.23.0, peft 0.21.2, gguf 0.19.0)
"""
import json
import os

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

torch.manual_seed(11)
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

configs = {
    "llama": LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, init_lora_weights=False, task_type="CAUSAL_LM",
                        target_modules=["q_proj", "v_proj", "o_proj", "gate_proj", "down_proj"]),
    "qwen2": LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, init_lora_weights=False, task_type="CAUSAL_LM",
                        target_modules=["q_proj", "k_proj", "v_proj", "up_proj"]),
}
out = {}
for arch, cfg in configs.items():
    base = AutoModelForCausalLM.from_pretrained(".", gguf_file=f"tiny-{arch}.gguf", dtype=torch.float32,
                                                attn_implementation="eager").eval()
    with torch.no_grad():
        base_logits = base(input_ids=tt, attention_mask=mm, position_ids=pos).logits
    model = get_peft_model(base, cfg).eval()
    for n, p in model.named_parameters():  # B random too, but small enough to keep logits in range
        if "lora_B" in n:
            torch.nn.init.normal_(p, std=0.2)
    with torch.no_grad():
        logits = model(input_ids=tt, attention_mask=mm, position_ids=pos).logits
    logits64 = float64_logits(model)
    model.float()  # back exactly (float32 -> float64 -> float32 is lossless), saved and merged in float32
    model.save_pretrained(f"lora-{arch}")
    os.remove(f"lora-{arch}/README.md")  # peft's model card
    merged = model.merge_and_unload()
    with torch.no_grad():
        merged_logits = merged(input_ids=tt, attention_mask=mm, position_ids=pos).logits
    merged_logits64 = float64_logits(merged)
    valid = mm.bool()
    print(arch, "adapter moves logits by", (logits - base_logits)[valid].abs().max().item(),
          "merged differs from unmerged by", (merged_logits - logits)[valid].abs().max().item())
    out[arch] = {"logits": logits.flatten().tolist(), "merged_logits": merged_logits.flatten().tolist(),
                 "logits64": logits64.flatten().tolist(), "merged_logits64": merged_logits64.flatten().tolist()}
with open("lora_golden.json", "w") as f:
    json.dump(out, f)
