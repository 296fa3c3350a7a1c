package model

// The Qwen2 architecture (Hugging Face Qwen2ForCausalLM) as GoMLX graph functions.
//
// Formulas follow transformers' modeling_qwen2.py:
//
//	h = embed_tokens[tokens]
//	per layer:  h = h + o_proj(attn(rope(q_proj(n)), rope(k_proj(n)), v_proj(n)))  with n = input_layernorm(h)
//	            h = h + down_proj(silu(gate_proj(n)) * up_proj(n))                  with n = post_attention_layernorm(h)
//	logits = lm_head(norm(h))   (lm_head.weight = embed_tokens.weight when tie_word_embeddings)
//
//	RMSNorm(x) = weight * x / sqrt(mean(x^2) + rms_norm_eps)
//	RoPE: inv_freq[i] = 1 / rope_theta^(2i/head_dim), angle = position * inv_freq, emb = concat(angle, angle),
//	      x' = x*cos(emb) + rotate_half(x)*sin(emb), rotate_half(x) = concat(-x[half:], x[:half])
//	attention: softmax(q k^T / sqrt(head_dim) masked) v, with num_key_value_heads shared by groups of query heads
//	           (query head h uses key/value head h / (num_attention_heads/num_key_value_heads)); q, k, v have biases,
//	           o_proj has none.
//
// Positions are derived from the attention mask as transformers' generate() does: position = (number of real
// tokens before this one), so left-padded and right-padded rows give the same values for their real tokens.
// All arithmetic is float32, but for the linear layers' matmuls with bf16 (bf16.go).

import (
	"math"
	"strconv"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads like the formulas.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// maskedScore is added to the attention scores of masked keys: finite, so a query with no visible key (a padding
// row) gets a uniform distribution instead of NaN, and gradients stay finite. Any score plus it rounds to it.
const maskedScore = -1e30

// variableNode returns the value of the existing variable name in ctx's scope, panicking with a readable message if missing.
func variableNode(ctx *context.Context, g *Graph, name string) *Node {
	v := ctx.GetVariableByScopeAndName(ctx.Scope(), name)
	if v == nil {
		panic("model: variable " + ctx.Scope() + "/" + name + " does not exist (create the model with New or Load)")
	}
	return v.ValueGraph(g)
}

// linear applies an HF nn.Linear stored as weight [out, in] (and bias [out] when withBias): x @ weight^T + bias,
// float32 (the product in bfloat16 with bf16).
func linear(ctx *context.Context, x *Node, withBias bool) *Node {
	g := x.Graph()
	y := project(ctx, x, variableNode(ctx, g, "weight")) // in bfloat16 with bf16 (bf16.go)
	if withBias {
		y = Add(y, ExpandLeftToRank(asFloat32(variableNode(ctx, g, "bias")), y.Rank()))
	}
	if d := loraDelta(ctx, x); d != nil { // a LoRA adapter on this layer (lora.go)
		y = Add(y, d)
	}
	return y
}

// rmsNorm is Qwen2RMSNorm.
func rmsNorm(ctx *context.Context, x *Node, eps float64) *Node {
	variance := ReduceAndKeep(Square(x), ReduceMean, -1)
	x = Div(x, Sqrt(AddScalar(variance, eps))) // Rsqrt has no gradient in GoMLX
	return Mul(x, ExpandLeftToRank(asFloat32(variableNode(ctx, x.Graph(), "weight")), x.Rank()))
}

// rotary returns cos and sin of shape [B, T, 1, headDim] for int32 positions [B, T].
func (m *Model) rotary(positions *Node) (cos, sin *Node) {
	g := positions.Graph()
	hd := m.Config.HeadDim()
	invFreq := make([]float32, hd/2)
	for i := range invFreq {
		// As transformers: base ** (arange(0, dim, 2).float() / dim), in float32.
		invFreq[i] = 1 / float32(math.Pow(m.Config.RopeTheta, float64(float32(2*i)/float32(hd))))
	}
	angle := Mul(ExpandAxes(ConvertDType(positions, dtypes.Float32), -1), Reshape(Const(g, invFreq), 1, 1, hd/2)) // [B, T, hd/2]
	emb := Concatenate([]*Node{angle, angle}, -1)                                                                 // [B, T, hd]
	emb = ExpandAxes(emb, 2)                                                                                      // [B, T, 1, hd]
	return materialized(Cos(emb)), materialized(Sin(emb))
}

// materialized returns x [..., n] through a product with the n x n identity, which is x exactly (each output is one
// product by 1 plus products by 0) but is a node XLA does not fuse into its consumers. XLA fuses an elementwise
// producer into every consumer that reads it, so without it the cosines and sines of rotary were evaluated again
// inside each product that broadcasts them over the heads, per layer, forward and backward (36 cosines of the
// whole [B, T, headDim] table in the tiny model's GRPO step); with it they are computed once.
func materialized(x *Node) *Node {
	n := x.Shape().Dim(-1)
	eye := make([]float32, n*n)
	for i := range n {
		eye[i*n+i] = 1
	}
	id := Const(x.Graph(), tensors.FromFlatDataAndDimensions(eye, n, n))
	return DotGeneral(x, []int{x.Rank() - 1}, nil, id, []int{0}, nil)
}

// applyRotary rotates x [B, T, heads, headDim]: x*cos + rotate_half(x)*sin, where rotate_half(x) =
// [-x2, x1] is taken as a product with a constant signed permutation matrix, so that its gradient needs no
// Pad (which the pure-Go backend lacks: slicing a differentiable tensor would make training fail).
func applyRotary(x, cos, sin *Node) *Node {
	hd := x.Shape().Dim(-1)
	half := hd / 2
	r := make([]float32, hd*hd) // r[j*hd+i]: weight of x[j] in rotated[i]
	for i := range half {
		r[(half+i)*hd+i] = -1 // rotated[i] = -x2[i]
		r[i*hd+half+i] = 1    // rotated[half+i] = x1[i]
	}
	rot := Const(x.Graph(), tensors.FromFlatDataAndDimensions(r, hd, hd))
	rotated := DotGeneral(x, []int{3}, nil, ConvertDType(rot, x.DType()), []int{0}, nil) // [B, T, heads, hd]
	return Add(Mul(x, cos), Mul(rotated, sin))
}

// kvCache is the key/value cache of one layer inside a decode graph: tensors [B, kvHeads, S, headDim], laid out
// as attention reads them (batch axes in front, so its matmuls need no transposition).
// New keys are written at slots [cursor, cursor+K).
type kvCache struct {
	k, v  *Node
	slots *kvSlots
}

// kvSlots are the cache slots a decoding step writes, shared by every layer's keys and values.
type kvSlots struct {
	cursor *Node // int32 scalar: the first slot
	idx    *Node // [B*kvH*K, 3] scatter indices, built by the first write
}

// write returns cache with new [B, kvHeads, K, headDim] stored at slots [cursor, cursor+K). Those slots are still
// zero (a Session's cache starts at zero and its cursor only advances), so the write is a ScatterSum of
// B x kvHeads x K rows: with the cache buffer donated it runs in place, where a select over all S slots cost O(S)
// per token.
func (c *kvCache) write(cache, update *Node) *Node {
	g := cache.Graph()
	b, h, k, hd := update.Shape().Dim(0), update.Shape().Dim(1), update.Shape().Dim(2), update.Shape().Dim(3)
	if c.slots.idx == nil { // the same for every layer's keys and values: built once per graph
		rows := shapeInt32(b, h, k, 1)
		idx := Concatenate([]*Node{Iota(g, rows, 0), Iota(g, rows, 1), Add(Iota(g, rows, 2), c.slots.cursor)}, -1) // [B, kvH, K, 3]
		c.slots.idx = Reshape(idx, b*h*k, 3)
	}
	return ScatterSum(cache, c.slots.idx, Reshape(update, b*h*k, hd), true, true)
}

// attention is Qwen2Attention. x: [B, T, D]; bias: [B, 1, 1, T, S] added to the scores, 0 where a query may
// see a key and maskedScore where not (maskBias).
// Without a cache the keys are this call's T tokens (S = T); with one they are the S cache slots (after writing
// this call's keys into them), and the updated cache is returned.
func (m *Model) attention(ctx *context.Context, x, cos, sin, bias *Node, cache *kvCache) (*Node, *kvCache) {
	cfg := &m.Config
	b, t := x.Shape().Dim(0), x.Shape().Dim(1)
	hd, nh, nkv := cfg.HeadDim(), cfg.NumAttentionHeads, cfg.NumKeyValueHeads
	groups := nh / nkv

	qkvBias := cfg.attentionBias() // Qwen2: always; Llama: attention_bias
	q := Reshape(linear(ctx.In("q_proj"), x, qkvBias), b, t, nh, hd)
	k := Reshape(linear(ctx.In("k_proj"), x, qkvBias), b, t, nkv, hd)
	v := Reshape(linear(ctx.In("v_proj"), x, qkvBias), b, t, nkv, hd)
	// HF scales the scores q·k by 1/sqrt(head_dim); scaling q first is the same product on a tensor T/hd times
	// smaller (and exactly the same numbers when head_dim is a power of 4, as 64 and 256 are).
	q = MulScalar(applyRotary(q, cos, sin), 1/math.Sqrt(float64(hd)))
	k = applyRotary(k, cos, sin)

	q = TransposeAllAxes(Reshape(q, b, t, nkv, groups, hd), 0, 2, 3, 1, 4) // [B, kvH, G, T, hd]
	k = TransposeAllAxes(k, 0, 2, 1, 3)                                    // [B, kvH, T, hd]
	v = TransposeAllAxes(v, 0, 2, 1, 3)
	keys, values := k, v // [B, kvH, S, hd]
	if cache != nil {
		cache = &kvCache{k: cache.write(cache.k, k), v: cache.write(cache.v, v), slots: cache.slots}
		keys, values = cache.k, cache.v
	}
	// out is [B, kvH, G, T, hd]. Decoding is never differentiated: it goes without attend's gradient plumbing.
	var out *Node
	if cache != nil {
		out = DotGeneral(Softmax(Add(scores(q, keys), bias), -1), []int{4}, []int{0, 1}, values, []int{2}, []int{0, 1})
	} else {
		out = attend(q, keys, bias, values, checkpointing(ctx))
	}
	out = Reshape(TransposeAllAxes(out, 0, 3, 1, 2, 4), b, t, nh*hd)
	return linear(ctx.In("o_proj"), out, false), cache
}

// scores is q · keysᵀ [B, kvH, G, T, S] for q [B, kvH, G, T, hd] and keys [B, kvH, S, hd]. Adding the mask, as HF
// does, broadcasts it inside the Add; its gradient passes straight through.
func scores(q, keys *Node) *Node {
	return DotGeneral(q, []int{4}, []int{0, 1}, keys, []int{3}, []int{0, 1})
}

// attend is softmax(x) · values for the masked scores x = q · keysᵀ + bias [B, kvH, G, T, S] (q [B, kvH, G, T, hd],
// keys and values [B, kvH, S, hd], bias [B, 1, 1, T, S]), with the softmax's closed-form gradient
// x̄ = p ⊙ (p̄ - Σ p̄ ⊙ p), p̄ = ō · valuesᵀ: four passes over the scores where differentiating exp, sum and divide
// op by op took about a dozen.
//
// With recompute (Model.SetGradientCheckpointing) the backward pass computes p again from q and keys (inBackward,
// which selects the keys), for the scores' gradient and for the values' (pᵀ · ō), so no [B, kvH, G, T, S] tensor
// is kept from the forward pass to the backward: what the recomputation reads, q, keys and values, the products' own gradients keep anyway (on XLA
// also the two [B, T, kvH·hd] tensors the keys are made of, which it fuses into the select). That costs one more
// q · keysᵀ product and softmax per layer (3.5% of a SmolLM2 step's multiply-adds at 8 x 512 tokens, and 12% of
// its time on XLA: the softmax's passes over the scores come twice) and frees B·n_h·T·S floats per layer (for
// SmolLM2 at 8 x 512 tokens, 72 MiB a layer, 2.1 GiB over its 30 layers), which both engines keep until the
// layer's backward without it. The recomputed p is the forward's bit for bit (the same ops on the same values),
// and so are the gradients (TestRecomputeExact).
//
// p is computed from a stopped x, so GoMLX differentiates the product with the values only, and the custom
// identity on the values replaces that gradient (whose nodes, which read the forward's p, no output then uses)
// with pᵀ · ō from the recomputed p, formed as the DotGeneral gradient (internal/kernels) forms it. The scores'
// gradient needs ō, the gradient arriving at the output: a custom identity on the output records it, and the
// output also carries an exactly-zero link, the row sums of (x' - x) for a custom identity x' of x, through
// which GoMLX's reverse pass reaches x'; x' and the values' identity then compute their gradients from the
// recorded ō (the output, created after both, is visited first).
func attend(q, keys, bias, values *Node, recompute bool) *Node {
	x := Add(scores(q, keys), bias)
	fixed := StopGradient(x)
	p := Softmax(fixed, -1)
	var outGrad, pBack *Node
	backP := func() *Node { // p, for the backward pass
		if outGrad == nil {
			panic("model: attention's gradients need its output's, which GoMLX did not visit first")
		}
		if pBack == nil {
			pBack = p
			if recompute {
				pBack = Softmax(Add(scores(StopGradient(q), inBackward(StopGradient(keys), ReduceAllSum(outGrad))), StopGradient(bias)), -1)
			}
		}
		return pBack
	}
	xc := IdentityWithCustomGradient(x, func(_, _ *Node) *Node {
		p := backP()
		dp := DotGeneral(outGrad, []int{4}, []int{0, 1}, StopGradient(values), []int{3}, []int{0, 1}) // [B, kvH, G, T, S]
		return Mul(p, Sub(dp, ReduceAndKeep(Mul(dp, p), ReduceSum, -1)))
	})
	vc := IdentityWithCustomGradient(values, func(_, _ *Node) *Node {
		return TransposeAllAxes(DotGeneral(outGrad, []int{2, 3}, []int{0, 1}, backP(), []int{2, 3}, []int{0, 1}), 0, 1, 3, 2)
	})
	out := DotGeneral(p, []int{4}, []int{0, 1}, vc, []int{2}, []int{0, 1}) // [B, kvH, G, T, hd]
	out = Add(out, ReduceAndKeep(Sub(xc, fixed), ReduceSum, -1))
	return IdentityWithCustomGradient(out, func(_, v *Node) *Node {
		outGrad = v
		return v
	})
}

// mlp is Qwen2MLP (SwiGLU). A graph that is never differentiated (decoding) passes plain to compute silu(gate) *
// up without swiGLU's gradient plumbing: the same values, eight ops fewer.
func mlp(ctx *context.Context, x *Node, plain bool) *Node {
	gate := linear(ctx.In("gate_proj"), x, false)
	up := linear(ctx.In("up_proj"), x, false)
	if plain {
		return linear(ctx.In("down_proj"), Mul(Mul(gate, Sigmoid(gate)), up), false)
	}
	return linear(ctx.In("down_proj"), swiGLU(gate, up, recomputing(ctx)), false)
}

// swiGLU is silu(gate) * up with its closed-form gradients, ḡ = ȳ ⊙ up ⊙ σ(g) ⊙ (1 + g ⊙ (1 - σ(g))) and
// ū = ȳ ⊙ g ⊙ σ(g), recomputing σ(g) and g ⊙ σ(g) in the backward pass from g (inBackward): only gate and up are
// kept for it, where differentiating op by op kept σ(g) and g ⊙ σ(g) as well (for SmolLM2 at 8 x 512 tokens, 48
// MiB a layer), and so did XLA while the recomputation read g itself, merging it with the forward's. The output
// is y + (g' - g) + (u' - u) over custom identities g' and u', exactly y, whose gradient reaches gate and up only
// through the identities. Without recompute (recomputeParam false, in tests) the gradients read g as it is.
func swiGLU(gate, up *Node, recompute bool) *Node {
	g, u := StopGradient(gate), StopGradient(up)
	y := Mul(Mul(g, Sigmoid(g)), u)
	back := func(v *Node) *Node { // g, for the backward pass
		if recompute {
			return inBackward(g, v)
		}
		return g
	}
	gc := IdentityWithCustomGradient(gate, func(_, v *Node) *Node {
		g := back(v)
		sig := Sigmoid(g)
		return Mul(Mul(v, u), Mul(sig, AddScalar(Mul(g, OneMinus(sig)), 1)))
	})
	uc := IdentityWithCustomGradient(up, func(_, v *Node) *Node {
		g := back(v)
		return Mul(v, Mul(g, Sigmoid(g)))
	})
	return Add(Add(y, Sub(gc, g)), Sub(uc, u))
}

// maskBias turns allowed, bool [B, T, S] ("query t may see key s"), into the attention scores' additive mask
// [B, 1, 1, T, S]: 0 where allowed, maskedScore elsewhere.
func maskBias(allowed *Node) *Node {
	g := allowed.Graph()
	d := allowed.Shape().Dimensions
	bias := Where(allowed, ScalarZero(g, dtypes.Float32), Scalar(g, dtypes.Float32, maskedScore))
	return Reshape(bias, d[0], 1, 1, d[1], d[2])
}

// decoder runs the embedding and all decoder layers, returning hidden states [B, T, D] before the final norm.
// caches, when not nil, has one entry per layer and is updated in place (the slice's elements are replaced).
func (m *Model) decoder(ctx *context.Context, tokens, positions, allowed *Node, caches []*kvCache) *Node {
	cfg := &m.Config
	mctx := ctx.In("model")
	h := m.embed(ctx, tokens) // [B, T, D]
	cos, sin := m.rotary(positions)
	bias := maskBias(allowed)
	for i := range cfg.NumHiddenLayers {
		lctx := mctx.In("layers").In(strconv.Itoa(i))
		var cache *kvCache
		if caches != nil {
			cache = caches[i]
		}
		attn, newCache := m.attention(lctx.In("self_attn"), rmsNorm(lctx.In("input_layernorm"), h, cfg.RMSNormEps),
			cos, sin, bias, cache)
		if caches != nil {
			caches[i] = newCache
		}
		h = Add(h, attn)
		h = Add(h, mlp(lctx.In("mlp"), rmsNorm(lctx.In("post_attention_layernorm"), h, cfg.RMSNormEps), caches != nil))
	}
	return h
}

// lmHead applies the final norm and the (tied or untied) output projection: [..., D] -> [..., V].
func (m *Model) lmHead(ctx *context.Context, h *Node) *Node {
	h = rmsNorm(ctx.In("model").In("norm"), h, m.Config.RMSNormEps)
	wctx := ctx.In("lm_head")
	if m.Config.TieWordEmbeddings {
		wctx = ctx.In("model").In("embed_tokens")
	}
	return m.tiedTokenLogits(ctx, h, linear(wctx, h, false))
}

// maskAndPositions turns an attention mask [B, T] (1 = real token, 0 = padding; any numeric or bool dtype)
// into a bool mask and int32 positions (count of real tokens before each one; 0 for padding).
func maskAndPositions(attentionMask *Node) (valid, positions *Node) {
	g := attentionMask.Graph()
	if attentionMask.DType() == dtypes.Bool {
		valid = attentionMask
	} else {
		valid = NotEqual(attentionMask, ScalarZero(g, attentionMask.DType()))
	}
	ones := ConvertDType(valid, dtypes.Int32)
	positions = Max(Sub(prefixSum(ones), ScalarOne(g, dtypes.Int32)), ScalarZero(g, dtypes.Int32))
	return valid, positions
}

// prefixSum is CumSum(x, 1) for an int32 [B, T], as log2(T) shifted adds: GoMLX's CumSum runs as a
// ReduceWindow, which simplego computes one window at a time (8 ms for [8, 256] here).
func prefixSum(x *Node) *Node {
	b, t := x.Shape().Dim(0), x.Shape().Dim(1)
	for k := 1; k < t; k *= 2 {
		shifted := Concatenate([]*Node{Zeros(x.Graph(), shapeInt32(b, k)), SliceAxis(x, 1, AxisRange(0, t-k))}, 1)
		x = Add(x, shifted)
	}
	return x
}

// causalAllowed is the bool [B, T, T] matrix "query t may attend key s": s <= t and key s is a real token.
func causalAllowed(valid *Node) *Node {
	g := valid.Graph()
	t := valid.Shape().Dim(1)
	qi := Iota(g, shapeInt32(t, t), 0)
	ki := Iota(g, shapeInt32(t, t), 1)
	causal := ExpandAxes(LessOrEqual(ki, qi), 0) // [1, T, T]
	b := valid.Shape().Dim(0)
	return And(BroadcastToDims(causal, b, t, t), BroadcastToDims(ExpandAxes(valid, 1), b, t, t))
}

// Logits is the full forward pass: logits [B, T, vocab_size] (float32) for tokens [B, T] (int32) and
// attentionMask [B, T] (1 or true = real token, 0 = padding; left or right padding, contiguous real tokens).
// Logits at padding positions are meaningless. ctx must be (a reference to) the model's context at its root
// scope, m.Ctx, or a context holding the same variables.
func (m *Model) Logits(ctx *context.Context, tokens, attentionMask *Node) *Node {
	valid, positions := maskAndPositions(attentionMask)
	h := m.decoder(ctx, tokens, positions, causalAllowed(valid), nil)
	return m.lmHead(ctx, h)
}

// TokenLogProbs returns log-probabilities [B, T] (float32, differentiable w.r.t. the model's variables) with
// out[b, t] = log p(tokens[b, t] | tokens[b, <t]) under the model at temperature 1, aligned with tokens so that a
// loss mask over tokens applies directly. out[b, t] is 0 where it is not defined: t = 0, padding, and the first
// real token of a left-padded row (attentionMask[b, t] = 0 or attentionMask[b, t-1] = 0).
func (m *Model) TokenLogProbs(ctx *context.Context, tokens, attentionMask *Node) *Node {
	return m.TokenLogProbsAt(ctx, tokens, attentionMask, 1)
}

// TokenLogProbsAt is TokenLogProbs with logits divided by temperature first, as TRL computes the policy's and the
// old policy's per-token log-probs (log_softmax(logits / temperature)), so that ratios match Session.Generate's
// Completion.LogProbs at that temperature.
func (m *Model) TokenLogProbsAt(ctx *context.Context, tokens, attentionMask *Node, temperature float64) *Node {
	return m.TokenLogProbsFrom(ctx, tokens, attentionMask, temperature, 0)
}

// TokenLogProbsFrom is TokenLogProbsAt for the positions from on only, as TRL's logits_to_keep: out[b, t] is 0 for
// t < from, and those positions are not multiplied by the output projection, forward or backward (the
// decoder still runs over the whole sequence). A trainer passes the first position its loss covers.
func (m *Model) TokenLogProbsFrom(ctx *context.Context, tokens, attentionMask *Node, temperature float64, from int) *Node {
	t := tokens.Shape().Dim(1)
	valid, positions := maskAndPositions(attentionMask)
	h := m.decoder(ctx, tokens, positions, causalAllowed(valid), nil)
	var out *Node
	if w, ok := m.outputWeight(ctx, tokens.Graph()); ok {
		// Chunked over positions, forward and backward: never [B, T, vocab] at once (logprobs.go).
		h = rmsNorm(ctx.In("model").In("norm"), h, m.Config.RMSNormEps)
		out = tokenLogProbs(h, w, tokens, temperature, logProbChunkRows(m.Config.VocabSize), from)
	} else {
		out = denseTokenLogProbs(m.lmHead(ctx, h), tokens, temperature)
		if from > 0 {
			out = Where(LessThan(Iota(out.Graph(), shapeInt32(out.Shape().Dimensions...), 1), Scalar(out.Graph(), dtypes.Int32, from)), ZerosLike(out), out)
		}
	}
	// out[b, t] is defined where tokens t-1 and t are both real.
	ok := And(SliceAxis(valid, 1, AxisRange(1)), SliceAxis(valid, 1, AxisRange(0, t-1)))
	ok = Concatenate([]*Node{ZerosLike(SliceAxis(valid, 1, AxisRange(0, 1))), ok}, 1)
	return Where(ok, out, ZerosLike(out))
}

// denseTokenLogProbs is tokenLogProbs from the full logits [B, T, V] (a LoRA adapter on the output projection,
// which only linear applies): out[b, t] = log_softmax(logits[b, t-1] / temperature)[tokens[b, t]], 0 at t = 0.
func denseTokenLogProbs(logits, tokens *Node, temperature float64) *Node {
	g := tokens.Graph()
	b, t := tokens.Shape().Dim(0), tokens.Shape().Dim(1)
	if temperature != 1 {
		logits = MulScalar(logits, 1/temperature)
	}
	// Position t predicts tokens[t+1]; the targets are shifted, never the differentiable values (slicing
	// them would need Pad in the gradient, which the pure-Go backend lacks).
	ids := ConvertDType(tokens, dtypes.Int32)
	target := Concatenate([]*Node{SliceAxis(ids, 1, AxisRange(1)), ZerosLike(SliceAxis(ids, 1, AxisRange(0, 1)))}, 1)
	at := shapeInt32(b, t, 1)
	idx := Concatenate([]*Node{Iota(g, at, 0), Iota(g, at, 1), ExpandAxes(target, -1)}, -1) // [B, T, 3]
	picked := Gather(LogSoftmax(logits, -1), idx)                                           // [B, T]
	// Align with tokens: out[:, t] = picked[:, t-1], as a product with the shift matrix.
	shift := make([]float32, t*t)
	for i := 0; i+1 < t; i++ {
		shift[i*t+i+1] = 1
	}
	return DotGeneral(picked, []int{1}, nil, Const(g, tensors.FromFlatDataAndDimensions(shift, t, t)), []int{0}, nil) // [B, T]
}

// decodeStep is the KV-cache graph: it feeds K new tokens per sequence (left-aligned padding inside the chunk),
// writes their keys/values at cache slots [cursor, cursor+K) and returns the logits [B, V] of the chunk's last
// position plus the updated caches. slotValid [B, S] (int32, 1 = the slot holds a real token of that sequence,
// including this chunk's) decides what each sequence attends to; a query at slot cursor+i sees valid slots
// <= cursor+i. Since keys are stored already rotated at their own positions, slot order does not matter.
func (m *Model) decodeStep(ctx *context.Context, inputs []*Node) []*Node {
	tokens, positions, slotValid, cursor := inputs[0], inputs[1], inputs[2], inputs[3]
	g := tokens.Graph()
	L := m.Config.NumHiddenLayers
	b, k := tokens.Shape().Dim(0), tokens.Shape().Dim(1)
	s := slotValid.Shape().Dim(1)
	caches := make([]*kvCache, L)
	slots := &kvSlots{cursor: cursor}
	for i := range L {
		caches[i] = &kvCache{k: inputs[4+2*i], v: inputs[5+2*i], slots: slots}
	}
	qSlot := Add(Iota(g, shapeInt32(k, s), 0), cursor)
	kSlot := Iota(g, shapeInt32(k, s), 1)
	causal := BroadcastToDims(ExpandAxes(LessOrEqual(kSlot, qSlot), 0), b, k, s)
	valid := BroadcastToDims(ExpandAxes(NotEqual(slotValid, ScalarZero(g, dtypes.Int32)), 1), b, k, s)
	h := m.decoder(ctx, tokens, positions, And(causal, valid), caches)
	last := Squeeze(SliceAxis(h, 1, AxisRange(k-1)), 1) // [B, D]
	outs := []*Node{m.lmHead(ctx, last)}
	for _, c := range caches {
		outs = append(outs, c.k, c.v)
	}
	return outs
}
