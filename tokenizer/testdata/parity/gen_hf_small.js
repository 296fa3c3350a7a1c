// Generates small_hf_encode.jsonl: the ids that Hugging Face's own tokenizers library (the Rust crate, through
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
  if (small.getVocabSize(true) !== 2048) throw new Error('small vocab size ' + small.getVocabSize(true));
  fs.writeFileSync('small_hf_encode.jsonl', out.join('\n') + '\n');
  console.log(`full tokenizer: ${fullSame}/${cases.length} reference encodings reproduced; ` +
    `small: ${out.length} encodings written, vocab ${small.getVocabSize(true)}`);
})();
