"""`mcprl generate --greedy --logprobs` against transformers' generate on the same tiny Qwen2.

A random Qwen2 (transformers' save_pretrained, the reduced 2,048-id Qwen2.5 tokenizer) decodes a chat prompt;
mcprl's prompt ids are the tokenizer's, its greedy tokens are transformers' (stopping at the same end-of-turn
ids), and each token's log-prob is no further from transformers' float64 answer than three times transformers' own
float32 error plus one rounding (conftest.rounding_bound).
"""

from __future__ import annotations

import json
import pathlib
import shutil

import torch
from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

from conftest import REPO, rounding_bound, run_mcprl

TOKENIZER = REPO / "tokenizer" / "small" / "qwen2.5-2048"


def test_generate_matches_transformers(mcprl: pathlib.Path, tmp_path: pathlib.Path) -> None:
    torch.manual_seed(5)
    cfg = Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=2048, max_position_embeddings=512, rope_theta=1e6,
                      rms_norm_eps=1e-6, eos_token_id=2028, pad_token_id=2026, tie_word_embeddings=True,
                      use_sliding_window=False)
    model = Qwen2ForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(1 + 0.1 * torch.randn_like(p) if "norm" in name else 0.1 * torch.randn_like(p))
    directory = tmp_path / "tiny"
    model.save_pretrained(str(directory))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER / f, directory / f)
    tok = AutoTokenizer.from_pretrained(str(directory))

    out = run_mcprl(mcprl, "generate", "--model", str(directory), "--prompt", "Count the customers in Lyon.",
                    "--chat", "--greedy", "--logprobs", "--max-new-tokens", "48")
    rec = json.loads(out.splitlines()[-1])
    messages = [{"role": "user", "content": "Count the customers in Lyon."}]
    want_prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert rec["prompt"] == want_prompt
    assert rec["prompt_ids"] == tok(want_prompt)["input_ids"]

    stops = sorted({2028, tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")})
    ids = torch.tensor([rec["prompt_ids"]])
    with torch.no_grad():
        gen = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=48, eos_token_id=stops, pad_token_id=2026, output_logits=True,
                             return_dict_in_generate=True)
    want = gen.sequences[0, ids.shape[1]:].tolist()
    assert rec["ids"] == want, f"greedy tokens differ: mcprl {rec['ids']}, transformers {want}"
    assert len(want) >= 16, "stopped too early for a sharp check"
    assert rec["text"] == tok.decode(want)
    assert rec["finish_reason"] == ("stop" if want[-1] in stops else "length")
    logps = [torch.log_softmax(step[0].double(), -1)[t].item() for step, t in zip(gen.logits, want)]
    diff = max(abs(a - b) for a, b in zip(rec["logprobs"], logps))
    # The float64 answer: the whole sequence through the model in float64, each sampled token's log-prob.
    seq = torch.tensor([rec["prompt_ids"] + want])
    with torch.no_grad():
        logits64 = model.double()(input_ids=seq).logits[0, ids.shape[1] - 1:-1]
        model.float()
    exact = [torch.log_softmax(row, -1)[t].item() for row, t in zip(logits64, want)]
    torch_err = max(abs(a - b) for a, b in zip(logps, exact))
    our_err = max(abs(a - b) for a, b in zip(rec["logprobs"], exact))
    bound = rounding_bound(torch_err, max(abs(x) for x in exact))
    print(f"{len(want)} greedy tokens; max |log-prob difference| from transformers' float32 {diff:.3g}; "
          f"from float64: transformers {torch_err:.3g}, mcprl {our_err:.3g} (bound {bound:.3g})")
    assert our_err <= bound, f"log-probs {our_err:.3g} from float64, bound {bound:.3g}"
