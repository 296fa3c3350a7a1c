// Package model is the policy model of mcprl: the Qwen2 (Qwen2ForCausalLM) and Llama (LlamaForCausalLM,
// llama.go) architectures in GoMLX,
// Hugging Face safetensors in and out, per-token log-probs inside a differentiable graph for training,
// and batched KV-cache sampling sessions for rollouts.
//
// Variables live in a GoMLX *context.Context under scopes that mirror the Hugging Face tensor names
// ("model.layers.0.self_attn.q_proj.weight" is variable "weight" in scope "/model/layers/0/self_attn/q_proj"),
// with the same shapes (linear weights are [out, in]), so a checkpoint maps onto the context 1:1.
package model
