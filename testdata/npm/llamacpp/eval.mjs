// Runs a GGUF file in llama.cpp (node-llama-cpp's prebuilt CPU binary) for python/tests/test_gguf_export.py.
//
// Reads one JSON object from stdin:
//   {"model": PATH, "text": TEXT, "prompt": [id, ...], "max_new_tokens": N, "score": [id, ...]}
// and writes one JSON object to stdout:
//   "llama_cpp": the llama.cpp release of the binary,
//   "tokens":    llama.cpp's tokenization of TEXT (special tokens parsed, no BOS added),
//   "greedy":    N tokens decoded greedily after the prompt ids, one at a time with the KV cache,
//   "logprobs":  for each position of the score ids, log p(next token) over the whole vocabulary, from a
//                second sequence that evaluates those ids in one batch.
// The context computes in float32 throughout: float32 KV cache (llama.cpp's default is float16), no flash
// attention, one thread (the order of float32 sums does not depend on the machine).
import {getLlama} from "node-llama-cpp";

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const req = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath: req.model, gpuLayers: 0});
const n = Math.max(req.prompt.length + req.max_new_tokens, req.score.length);
const context = await model.createContext({
    contextSize: Math.max(64, n + 8), batchSize: Math.max(64, n + 8), sequences: 2, threads: 1,
    flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
});

const tokens = Array.from(model.tokenize(req.text, true));

// Greedy decoding, one token per call.
const seq = context.getSequence();
const next = [{generateNext: {token: true}}];
let out = await seq.controlledEvaluate(req.prompt.map((t, i) => i === req.prompt.length - 1 ? [t, next[0]] : t));
const greedy = [];
for (;;) {
    const tok = out[out.length - 1].next.token;
    greedy.push(tok);
    if (greedy.length === req.max_new_tokens) break;
    out = await seq.controlledEvaluate([[tok, next[0]]]);
}

// Every position's distribution over the vocabulary, in one batch.
const seq2 = context.getSequence();
const res = await seq2.controlledEvaluate(req.score.map((t) => [t, {generateNext: {probabilities: true}}]));
const logprobs = res.map((r) => {
    const p = r.next.probabilities;
    const row = new Array(p.size);
    for (const [id, prob] of p) row[id] = Math.log(prob);
    return row;
});

process.stdout.write(JSON.stringify({
    llama_cpp: llama.llamaCppRelease.release, tokens, greedy, logprobs,
}));
await context.dispose();
await model.dispose();
await llama.dispose();
