"""LoRA adapters that mcprl trains load in peft: PeftModel on the base gives the logits of mcprl's merged model.

mcprl imports the tiny Llama GGUF of model/testdata, runs two SFT steps with a LoRA adapter (use_peft, with TRL's
default lora_dropout 0.05) on the user's task, and merges the adapter (`mcprl model merge`). peft then loads final/adapter (adapter_config.json,
adapter_model.safetensors as mcprl wrote them) onto final/'s base weights, and transformers loads the merged
directory: the two must give the same logits, so peft reads mcprl's files as mcprl means them. peft reads the
adapter's lora_dropout into its nn.Dropout modules; in eval mode (as mcprl's merge and evaluation) they do nothing.
"""

from __future__ import annotations

import json
import pathlib

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM

from conftest import REPO, rounding_bound, run_mcprl

CONFIG = """model: {base}
tasks: {repo}/examples/customers/quick_tasks.jsonl
fixtures: {repo}/examples/fixtures
use_peft: true
lora_r: 4
lora_alpha: 8
lora_dropout: 0.05
lora_target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]
output_dir: {out}
learning_rate: 1.0e-2
max_steps: 2
per_device_train_batch_size: 2
lr_scheduler_type: constant
logging_steps: 1
save_steps: 100
seed: 5
max_prompt_length: 1024
max_completion_length: 1024
"""


def assert_merged_matches(peft_logits: torch.Tensor, merged_logits: torch.Tensor, exact: torch.Tensor) -> None:
    """mcprl's merged model gives peft's logits: no further from the float64 answer (peft's model in float64) than
    rounding_bound of peft's own float32 distance from it (two float32 computations round differently)."""
    peft_err = (peft_logits.double() - exact).abs().max().item()
    merged_err = (merged_logits.double() - exact).abs().max().item()
    bound = rounding_bound(peft_err, exact.abs().max().item())
    print(f"from float64: peft {peft_err:.3g}, mcprl's merged model {merged_err:.3g} (bound {bound:.3g}); "
          f"|peft - merged| {(peft_logits - merged_logits).abs().max().item():.3g}")
    assert merged_err <= bound, f"mcprl's merged model is {merged_err:.3g} from float64, bound {bound:.3g}"


def test_mcprl_adapter_loads_in_peft(mcprl: pathlib.Path, tmp_path: pathlib.Path) -> None:
    base = tmp_path / "base"
    run_mcprl(mcprl, "model", "import", "--from", str(REPO / "model/testdata/tiny-llama.gguf"), "--out", str(base),
              "--chat-template", str(REPO / "examples/smollm2/chat_template.jinja"),
              "--add-tokens", "<tool_call>,</tool_call>")
    cfg = tmp_path / "sft.yaml"
    cfg.write_text(CONFIG.format(base=base, repo=REPO, out=tmp_path / "sft"))
    run_mcprl(mcprl, "sft", "--config", str(cfg))
    final = tmp_path / "sft" / "final"
    assert json.loads((final / "adapter" / "adapter_config.json").read_text())["lora_dropout"] == 0.05
    run_mcprl(mcprl, "model", "merge", "--model", str(final), "--out", str(tmp_path / "merged"))

    tokens = torch.tensor([[5, 80, 17, 200, 3, 99, 140, 7, 61, 250]])
    with torch.no_grad():
        plain = AutoModelForCausalLM.from_pretrained(final, dtype=torch.float32, attn_implementation="eager")
        base_logits = plain(input_ids=tokens).logits
        peft = PeftModel.from_pretrained(plain, final / "adapter").eval()
        q_proj = peft.base_model.model.model.layers[0].self_attn.q_proj
        assert q_proj.lora_dropout["default"].p == 0.05
        peft_logits = peft(input_ids=tokens).logits
        merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged", dtype=torch.float32,
                                                      attn_implementation="eager").eval()
        merged_logits = merged(input_ids=tokens).logits
        exact = peft.double()(input_ids=tokens).logits
    moved = (peft_logits - base_logits).abs().max().item()
    assert moved > 1e-3, f"the trained adapter changes nothing (max {moved})"
    assert_merged_matches(peft_logits, merged_logits, exact)


def test_mcprl_trainable_tokens_load_in_peft(mcprl: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """An adapter trained with trainable_token_indices (the two tokens added at import, tied embeddings) loads in
    peft as LoraConfig.trainable_token_indices: peft wraps embed_tokens in its trainable-tokens layer with mcprl's
    rows, and gives the logits of mcprl's merged model, on input holding the added ids."""
    base = tmp_path / "base"
    run_mcprl(mcprl, "model", "import", "--from", str(REPO / "model/testdata/tiny-llama.gguf"), "--out", str(base),
              "--chat-template", str(REPO / "examples/smollm2/chat_template.jinja"),
              "--add-tokens", "<tool_call>,</tool_call>")
    vocab = json.loads((base / "config.json").read_text())["vocab_size"]
    added = [vocab - 2, vocab - 1]
    cfg = tmp_path / "sft.yaml"
    cfg.write_text(CONFIG.format(base=base, repo=REPO, out=tmp_path / "sft")
                   + f"trainable_token_indices: [{added[0]}, {added[1]}]\n")
    run_mcprl(mcprl, "sft", "--config", str(cfg))
    final = tmp_path / "sft" / "final"
    assert json.loads((final / "adapter" / "adapter_config.json").read_text())["trainable_token_indices"] == added
    run_mcprl(mcprl, "model", "merge", "--model", str(final), "--out", str(tmp_path / "merged"))

    tokens = torch.tensor([[5, 80, added[0], 200, 3, added[1], 140, 7, added[0], 250]])
    with torch.no_grad():
        plain = AutoModelForCausalLM.from_pretrained(final, dtype=torch.float32, attn_implementation="eager")
        assert plain.config.tie_word_embeddings
        base_rows = plain.get_input_embeddings().weight[added].clone()
        base_logits = plain(input_ids=tokens).logits
        peft = PeftModel.from_pretrained(plain, final / "adapter").eval()
        embed = peft.base_model.model.model.embed_tokens
        rows = embed.token_adapter.trainable_tokens_delta["default"]
        assert embed.token_adapter.token_indices["default"] == added
        peft_logits = peft(input_ids=tokens).logits
        merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged", dtype=torch.float32,
                                                      attn_implementation="eager").eval()
        merged_logits = merged(input_ids=tokens).logits
        merged_rows = merged.get_input_embeddings().weight[added]
    assert (rows - base_rows).abs().max().item() > 1e-4, "training did not move the added tokens' rows"
    assert torch.equal(rows, merged_rows), "mcprl's merge did not write peft's rows into the embedding"
    moved = (peft_logits - base_logits)[..., added].abs().max().item()
    assert moved > 1e-3, f"the trained rows change no logit of the added ids (max {moved})"
    with torch.no_grad():
        exact = peft.double()(input_ids=tokens).logits
    assert_merged_matches(peft_logits, merged_logits, exact)
