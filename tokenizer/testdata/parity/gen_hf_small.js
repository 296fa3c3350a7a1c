// Generates hf_edge_encode.jsonl (edge cases and long runs, full and small tokenizer) and small_hf_encode.jsonl: the ids that Hugging Face's own tokenizers library (the Rust crate, through
// its Node binding, npm package tokenizers@0.23.2) gives the 400 parity strings with the reduced tokenizer
// that `mcprl tokenizer reduce --size 2048` wrote to tokenizer/small/qwen2.5-2048. It also checks that
// the library loads that tokenizer.json, decodes the ids back, and reproduces qwen2.5_encode.jsonl with the
// full tokenizer.
//
//   mkdir -p /tmp/hftok && (cd /tmp/hftok && npm install tokenizers@0.23.2)
//   cd tokenizer/testdata/parity && NODE_PATH=/tmp/hftok/node_modules node gen_hf_small.js
const fs = require('fs');
const { Tokenizer } = require('tokenizers');

(async () => {
  const cases = fs.readFileSync('qwen2.5_encode.jsonl', 'utf8').trim().split('\n').map(JSON.parse);
  const full = Tokenizer.fromFile('../qwen2.5/tokenizer.json');
  const small = Tokenizer.fromFile('../../small/qwen2.5-2048/tokenizer.json');
  let fullSame = 0;
  const out = [];
  for (const c of cases) {
    const f = (await full.encode(c.text, null, { addSpecialTokens: false })).getIds();
    if (JSON.stringify(f) === JSON.stringify(c.ids)) fullSame++;
    const ids = (await small.encode(c.text, null, { addSpecialTokens: false })).getIds();
    const back = await small.decode(ids, false);
    if (back !== c.text.normalize('NFC') && !/<\|[a-z_]+\|>|<\/?tool_call>/.test(c.text)) {
      throw new Error('small tokenizer does not round-trip ' + JSON.stringify(c.text));
    }
    out.push(JSON.stringify({ text: c.text, ids: ids, decoded: back }));
  }
  // Edge cases encoded by HF with both tokenizers: Unicode whitespace and case folding in the split pattern,
  // combining marks next to added tokens, and long runs (Encode's heap-merge path in Go).
  const edge = ["it'ſ ok", "IT'S", "we'LL", "x'ſt", "\u2028\u2028a", "a\u00a0\u00a0b", "\u0085\u0085x", "a\u200b\u200bb",
    "\u180e\u180ex", "\u3000\u3000x", "\ufeff\ufeffx", "e\u0301<|im_end|>\u0338x", "<|im_<|im_end|>", "<tool_call></tool_call><|im_end|",
    " ".repeat(2000), " ".repeat(2000) + "x", "-".repeat(3000), "=-".repeat(1000) + "\n\n", "a".repeat(2500), "ab".repeat(900),
    "日本".repeat(400), "\t \u00a0".repeat(300) + "end", "SELECT '" + "x".repeat(1000) + "' FROM t;" + " ".repeat(300) + "|",
    "\n".repeat(700) + "b", "😀".repeat(300), "│ id │ name │\n├────┼──────┤\n".repeat(20) + "═".repeat(400)];
  const edgeOut = [];
  for (const text of edge) {
    const f = (await full.encode(text, null, { addSpecialTokens: false })).getIds();
    const sm = (await small.encode(text, null, { addSpecialTokens: false })).getIds();
    edgeOut.push(JSON.stringify({ text: text, ids: f, small_ids: sm }));
  }
  fs.writeFileSync('hf_edge_encode.jsonl', edgeOut.join('\n') + '\n');
  if (small.getVocabSize(true) !== 2048) throw new Error('small vocab size ' + small.getVocabSize(true));
  fs.writeFileSync('small_hf_encode.jsonl', out.join('\n') + '\n');
  console.log(`full tokenizer: ${fullSame}/${cases.length} reference encodings reproduced; ` +
    `small: ${out.length} encodings written, vocab ${small.getVocabSize(true)}`);
})();
