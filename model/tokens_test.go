package model

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// TestTrainableTokens, for the tiny Llama (tied embeddings) and Qwen2 with two tokens added at import: a fresh
// adapter with trainable_token_indices leaves the logits bit-identical and trains the listed rows besides lora_A
// and lora_B; with other values in those rows, the embeddings of every other token and (tied) the logits of every
// other id stay bit-identical while the listed ones take the new values; the chunked log-probs agree with the
// full logits; the adapter saves under peft's name, loads back to the same logits, and merges into an embedding
// that differs from the base in the listed rows only and gives the adapter's logits.
func TestTrainableTokens(t *testing.T) {
	toks, mask := tinyBatch(t)
	for _, arch := range []string{"llama", "qwen2"} {
		t.Run(arch, func(t *testing.T) {
			load := func(dir string) *Model {
				m, err := Load(testBackend(t), dir)
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			dir := t.TempDir()
			if _, err := ImportGGUF(filepath.Join("testdata", "tiny-"+arch+".gguf"), dir, ImportOptions{AddTokens: []string{"<tool_call>", "</tool_call>"}}); err != nil {
				t.Fatal(err)
			}
			m := load(dir)
			V, D := m.Config.VocabSize, m.Config.HiddenSize
			ids := []int{V - 2, V - 1, 7} // the two added tokens and one of the file's
			// A batch that holds the listed ids, beside tinyBatch's (which holds none of them).
			with := slices.Clone(toks)
			with[0] = slices.Clone(with[0])
			with[0][1], with[0][2], with[0][3] = int32(V-2), 7, int32(V-1)
			embed := func(ctx *context.Context, tokens, _ *graph.Node) *graph.Node { return m.embed(ctx, tokens) }
			baseEmb := run(t, m, embed, tensors.FromValue(with), tensors.FromValue(mask))
			base := run(t, m, m.Logits, tensors.FromValue(toks), tensors.FromValue(mask))
			baseW, _, err := m.Tensor("model.embed_tokens.weight")
			if err != nil {
				t.Fatal(err)
			}

			if err := m.AddLoRA(LoRAConfig{R: 2, Alpha: 4, TargetModules: []string{"q_proj"}, TrainableTokenIndices: ids}, 1); err != nil {
				t.Fatal(err)
			}
			// Fresh: every logit as before; those of the listed ids (tied) computed apart, to rounding.
			fresh := run(t, m, m.Logits, tensors.FromValue(toks), tensors.FromValue(mask))
			for i := range fresh {
				if d := math.Abs(float64(fresh[i] - base[i])); d != 0 && (!slices.Contains(ids, i%V) || d > dotTol(m.Config.HiddenSize, 1+math.Abs(float64(base[i])))) {
					t.Fatalf("fresh trainable tokens changed the logit of id %d by %g", i%V, d)
				}
			}
			names := TrainableNames(m)
			if !slices.Contains(names, "/model/embed_tokens/token_adapter/trainable_tokens_delta") || len(names) != 2*m.Config.NumHiddenLayers+1 {
				t.Errorf("trainable: %v", names)
			}
			rows := make([]float32, len(ids)*D)
			for i := range rows {
				rows[i] = float32(i%11-5) * 0.03
			}
			if err := m.setTokenRows(rows, len(ids)); err != nil {
				t.Fatal(err)
			}

			emb := run(t, m, embed, tensors.FromValue(with), tensors.FromValue(mask))
			for b := range with {
				for p, id := range with[b] {
					got, was := emb[(b*len(with[b])+p)*D:][:D], baseEmb[(b*len(with[b])+p)*D:][:D]
					if k := slices.Index(ids, int(id)); k >= 0 {
						if !slices.Equal(got, rows[k*D:(k+1)*D]) {
							t.Errorf("embedding of listed id %d is not its trainable row", id)
						}
					} else if !slices.Equal(got, was) {
						t.Errorf("embedding of id %d (not listed) changed", id)
					}
				}
			}

			logits := run(t, m, m.Logits, tensors.FromValue(toks), tensors.FromValue(mask))
			changed := 0
			for i := range logits {
				if v := i % V; slices.Contains(ids, v) {
					if logits[i] != base[i] {
						changed++
					}
				} else if logits[i] != base[i] {
					t.Fatalf("logit of id %d (not listed) changed: %g, was %g", v, logits[i], base[i])
				}
			}
			if m.Config.TieWordEmbeddings != (changed > 0) {
				t.Errorf("tied %v, but %d logits of the listed ids changed", m.Config.TieWordEmbeddings, changed)
			}
			t.Logf("tied embeddings %v: %d logits of the listed ids changed, all others bit-identical", m.Config.TieWordEmbeddings, changed)

			// The chunked log-probs (the output projection as a tensor) agree with the full logits.
			lp := run(t, m, m.TokenLogProbs, tensors.FromValue(with), tensors.FromValue(mask))
			full := run(t, m, m.Logits, tensors.FromValue(with), tensors.FromValue(mask))
			T := len(with[0])
			worst := 0.0
			for b := range with {
				for p := 1; p < T; p++ {
					if mask[b][p] == 0 || mask[b][p-1] == 0 {
						continue
					}
					row := full[(b*T+p-1)*V:][:V]
					mx := float64(slices.Max(row))
					s := 0.0
					for _, l := range row {
						s += math.Exp(float64(l) - mx)
					}
					want := float64(row[with[b][p]]) - mx - math.Log(s)
					d := math.Abs(float64(lp[b*T+p]) - want)
					worst = math.Max(worst, d)
					// lm_head's hidden-size products in chunks, then a vocabulary-size sum.
					if bound := dotTol(m.Config.HiddenSize, 1+math.Abs(mx)) + dotTol(V, 1+math.Abs(want)); d > bound {
						t.Errorf("position [%d %d]: chunked log-prob %g, from the full logits %g (bound %.3g)", b, p, lp[b*T+p], want, bound)
					}
				}
			}
			t.Logf("chunked log-probs: max |diff| from the full logits' %.3g", worst)

			adir := t.TempDir()
			if err := m.SaveAdapter(adir); err != nil {
				t.Fatal(err)
			}
			st, err := openSafetensors(filepath.Join(adir, "adapter_model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			saved, err := st.readF32("base_model.model.model.embed_tokens.token_adapter.trainable_tokens_delta", []int{len(ids), D})
			st.Close()
			if err != nil || !slices.Equal(saved, rows) {
				t.Errorf("saved rows: %v", err)
			}
			m2 := load(dir)
			if err := m2.LoadAdapter(adir); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(m2.LoRA().TrainableTokenIndices, ids) {
				t.Errorf("loaded trainable_token_indices %v, want %v", m2.LoRA().TrainableTokenIndices, ids)
			}
			want := run(t, m, m.Logits, tensors.FromValue(with), tensors.FromValue(mask))
			if got := run(t, m2, m2.Logits, tensors.FromValue(with), tensors.FromValue(mask)); !slices.Equal(got, want) {
				t.Error("saved and loaded trainable tokens give other logits")
			}

			if err := m2.Merge(); err != nil {
				t.Fatal(err)
			}
			w, _, err := m2.Tensor("model.embed_tokens.weight")
			if err != nil {
				t.Fatal(err)
			}
			for id := range V {
				got, was := w[id*D:(id+1)*D], baseW[id*D:(id+1)*D]
				if k := slices.Index(ids, id); k >= 0 {
					was = rows[k*D : (k+1)*D]
				}
				if !slices.Equal(got, was) {
					t.Fatalf("merged embedding row %d is wrong", id)
				}
			}
			for _, n := range TrainableNames(m2) {
				if strings.Contains(n, "token_adapter") {
					t.Errorf("%s survives the merge", n)
				}
			}
			merged := run(t, m2, m2.Logits, tensors.FromValue(with), tensors.FromValue(mask))
			d := 0.0
			for i := range merged {
				// Merged weights round each layer's products differently from the adapter's two paths.
				e := math.Abs(float64(merged[i] - want[i]))
				d = math.Max(d, e)
				if e > forwardTol(&m2.Config, float64(want[i])) {
					t.Fatalf("merged logit %d: %g, the adapter's %g", i, merged[i], want[i])
				}
			}
			t.Logf("merged logits: max |diff| from the adapter's %.3g", d)
		})
	}
}

// TestTrainableTokensRejects: ids outside the vocabulary or listed twice are refused, naming them.
func TestTrainableTokensRejects(t *testing.T) {
	m := importTiny(t, "llama")
	V := m.Config.VocabSize
	for ids, want := range map[*[]int]string{&[]int{V}: "outside the vocabulary", &[]int{-1}: "outside", &[]int{3, 3}: "listed twice"} {
		err := m.AddLoRA(LoRAConfig{R: 2, Alpha: 4, TargetModules: []string{"q_proj"}, TrainableTokenIndices: *ids}, 1)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v, want %q", *ids, err, want)
		}
	}
	for _, raw := range []string{`{"lm_head": [1]}`, `"x"`} {
		if _, err := parseTokenIndices([]byte(raw)); err == nil {
			t.Errorf("%s accepted", raw)
		}
	}
	if ids, err := parseTokenIndices([]byte(`{"embed_tokens": [4, 5]}`)); err != nil || !slices.Equal(ids, []int{4, 5}) {
		t.Errorf("dict form: %v %v", ids, err)
	}
}

// TestTrainableTokensGradient: the gradient of the summed token log-probs (the chunked path a loss uses) with
// respect to the trainable rows matches a central finite difference, for tied (Llama) and untied (Qwen2)
// embeddings, with the listed ids both in the input and among the targets.
func TestTrainableTokensGradient(t *testing.T) {
	toks, mask := tinyBatch(t)
	for _, arch := range []string{"llama", "qwen2"} {
		t.Run(arch, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := ImportGGUF(filepath.Join("testdata", "tiny-"+arch+".gguf"), dir, ImportOptions{AddTokens: []string{"<a>", "<b>"}}); err != nil {
				t.Fatal(err)
			}
			m, err := Load(testBackend(t), dir)
			if err != nil {
				t.Fatal(err)
			}
			V := m.Config.VocabSize
			ids := []int{V - 2, V - 1}
			if err := m.AddLoRA(LoRAConfig{R: 2, Alpha: 4, TargetModules: []string{"q_proj"}, TrainableTokenIndices: ids}, 1); err != nil {
				t.Fatal(err)
			}
			// In the input and among the targets, then the last token only (the output side alone: an untied
			// model's rows get no gradient there).
			for _, at := range [][]int{{1, 4, 5}, {9}} {
				with := slices.Clone(toks)
				with[0] = slices.Clone(with[0])
				for k, p := range at {
					with[0][p] = int32(ids[k%2])
				}
				checkTokenGradient(t, m, with, mask)
			}
		})
	}
}

// checkTokenGradient compares the gradient of the summed token log-probs w.r.t. m's trainable rows with a central
// finite difference at a few elements.
func checkTokenGradient(t *testing.T, m *Model, with, mask [][]int32) {
	t.Helper()
	D := m.Config.HiddenSize
	n := len(m.LoRA().TrainableTokenIndices)
	scope, name := scopeOf(tokenAdapterTensor)
	loss := func(ctx *context.Context, tokens, mask *graph.Node) *graph.Node {
		return graph.ReduceAllSum(m.TokenLogProbs(ctx, tokens, mask))
	}
	grad := run(t, m, func(ctx *context.Context, tokens, mask *graph.Node) *graph.Node {
		rows := ctx.GetVariableByScopeAndName(scope, name).ValueGraph(tokens.Graph())
		return graph.Gradient(loss(ctx, tokens, mask), rows)[0]
	}, tensors.FromValue(with), tensors.FromValue(mask))
	rows, _, err := m.Tensor(tokenAdapterTensor)
	if err != nil {
		t.Fatal(err)
	}
	at := func(delta float32, i int) float64 {
		r := slices.Clone(rows)
		r[i] += delta
		if err := m.setTokenRows(r, n); err != nil {
			t.Fatal(err)
		}
		return float64(run(t, m, loss, tensors.FromValue(with), tensors.FromValue(mask))[0])
	}
	const eps = 1e-3
	for _, i := range []int{0, 3, D + 5, 2*D - 1} {
		fd := (at(eps, i) - at(-eps, i)) / (2 * eps)
		if math.Abs(fd-float64(grad[i])) > 1e-2*math.Max(1, math.Abs(fd)) {
			t.Errorf("d loss / d rows[%d]: gradient %g, finite difference %g", i, grad[i], fd)
		}
	}
	if err := m.setTokenRows(rows, n); err != nil {
		t.Fatal(err)
	}
}

// TestTrainableTokensGenerate: sampling (the KV-cache decoding graphs) uses the trainable rows on both sides. On
// the tiny Llama (tied) the first added token's row is made a scaled copy of the greedy choice's, so greedy
// decoding writes the added token first and then reads it back as input; the completion's log-probs equal
// TokenLogProbs on prompt + completion.
func TestTrainableTokensGenerate(t *testing.T) {
	toks, _ := tinyBatch(t)
	dir := t.TempDir()
	if _, err := ImportGGUF(filepath.Join("testdata", "tiny-llama.gguf"), dir, ImportOptions{AddTokens: []string{"<a>", "<b>"}}); err != nil {
		t.Fatal(err)
	}
	m, err := Load(testBackend(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Config.TieWordEmbeddings {
		t.Fatal("the tiny Llama is expected to tie its embeddings")
	}
	V, D := m.Config.VocabSize, m.Config.HiddenSize
	prompt := toks[:1]
	ones := [][]int32{make([]int32, len(prompt[0]))}
	for i := range ones[0] {
		ones[0][i] = 1
	}
	logits := run(t, m, m.Logits, tensors.FromValue(prompt), tensors.FromValue(ones))
	last := logits[len(logits)-V:]
	best := slices.Index(last, slices.Max(last))
	if err := m.AddLoRA(LoRAConfig{R: 2, Alpha: 4, TargetModules: []string{"q_proj"}, TrainableTokenIndices: []int{V - 2, V - 1}}, 1); err != nil {
		t.Fatal(err)
	}
	w, _, err := m.Tensor("model.embed_tokens.weight")
	if err != nil {
		t.Fatal(err)
	}
	scale := float32(2)
	if last[best] < 0 {
		scale = 0.5
	}
	rows := slices.Clone(w[(V-2)*D : V*D])
	for i := range D {
		rows[i] = scale * w[best*D+i]
	}
	if err := m.setTokenRows(rows, 2); err != nil {
		t.Fatal(err)
	}
	p := make([]int, len(prompt[0]))
	for i, id := range prompt[0] {
		p[i] = int(id)
	}
	c, err := m.Generate(t.Context(), [][]int{p}, SampleOptions{MaxNewTokens: 6}, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := c[0].Tokens
	if len(got) < 2 || got[0] != V-2 {
		t.Fatalf("greedy tokens %v, want the added token %d first", got, V-2)
	}
	seq := [][]int32{slices.Clone(prompt[0])}
	for _, id := range got {
		seq[0] = append(seq[0], int32(id))
	}
	mask := [][]int32{make([]int32, len(seq[0]))}
	for i := range mask[0] {
		mask[0][i] = 1
	}
	lp := run(t, m, m.TokenLogProbs, tensors.FromValue(seq), tensors.FromValue(mask))
	for i := range got {
		if d := math.Abs(float64(lp[len(p)+i] - c[0].LogProbs[i])); d > forwardTol(&m.Config, float64(lp[len(p)+i])) {
			t.Errorf("token %d (%d): generate's log-prob %g, TokenLogProbs %g", i, got[i], c[0].LogProbs[i], lp[len(p)+i])
		}
	}
}

// TestTrainableTokensMatchPeft: adapters that peft saved with trainable_token_indices for the tiny Llama (tied)
// and Qwen2 (untied) (testdata/gen_tokens_golden.py: random rows for three ids of the batch, LoRA on q_proj) load
// and give the PeftModel's logits; saved again they are peft's tensors bit for bit; merged they give the same
// logits. "Give" is within three times peft's own float32 rounding of its float64 answer (logitDiffs).
func TestTrainableTokensMatchPeft(t *testing.T) {
	golden, err := LoadTensors("testdata/tokens_golden.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	toks, mask := tinyBatch(t)
	for _, arch := range []string{"llama", "qwen2"} {
		t.Run(arch, func(t *testing.T) {
			want := tensors.MustCopyFlatData[float32](golden[arch+".logits"])
			rounding := tensors.MustCopyFlatData[float32](golden[arch+".rounding"])
			wantF, want64 := make([]float64, len(want)), make([]float64, len(want))
			for i, v := range want {
				wantF[i], want64[i] = float64(v), float64(v)+float64(rounding[i])
			}
			m := importTiny(t, arch)
			base := run(t, m, m.Logits, tensors.FromValue(toks), tensors.FromValue(mask))
			adapter := filepath.Join("testdata", "tokens-"+arch)
			if err := m.LoadAdapter(adapter); err != nil {
				t.Fatal(err)
			}
			if got := m.LoRA().TrainableTokenIndices; len(got) != 3 {
				t.Fatalf("trainable_token_indices %v", got)
			}
			logits := run(t, m, m.Logits, tensors.FromValue(toks), tensors.FromValue(mask))
			moved := maxValidDiff(base, wantF, mask)
			t.Logf("the adapter moves logits by up to %.3g", moved)
			if moved < 0.1 {
				t.Errorf("the adapter moves logits by %g only", moved)
			}
			validDiffs(logits, wantF, want64, mask).check(t, "logits with the adapter")
			out := t.TempDir()
			if err := m.SaveAdapter(out); err != nil {
				t.Fatal(err)
			}
			ours, err := LoadTensors(filepath.Join(out, "adapter_model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			peft, err := LoadTensors(filepath.Join(adapter, "adapter_model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			if len(ours) != len(peft) {
				t.Fatalf("saved %d tensors, peft %d", len(ours), len(peft))
			}
			for name, p := range peft {
				if o, ok := ours[name]; !ok || !slices.Equal(tensors.MustCopyFlatData[float32](o), tensors.MustCopyFlatData[float32](p)) {
					t.Errorf("saved adapter: %s differs from peft's", name)
				}
			}
			if err := m.Merge(); err != nil {
				t.Fatal(err)
			}
			merged := run(t, m, m.Logits, tensors.FromValue(toks), tensors.FromValue(mask))
			validDiffs(merged, wantF, want64, mask).check(t, "merged logits")
		})
	}
}
