package model

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads like the formulas.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// logProbChunkElements bounds the logits the log-prob graphs hold at once: positions are processed in chunks of
// logProbChunkElements / vocab_size rows (all of them when that is more than B x T). For the tiny default (2,048
// ids) an 8 x 256 batch is one chunk; SmolLM2's 49,152 ids take 341 positions a chunk, Qwen2.5's 151,936 take 110.
// A [rows, vocab] float32 tensor of the bound is 64 MiB, where [8, 512, 151,936] would be 2.3 GiB (and a softmax
// and its gradient hold several).
const logProbChunkElements = 1 << 24

// logProbChunkRows is the number of positions per chunk for a vocabulary of v ids.
func logProbChunkRows(v int) int { return max(1, logProbChunkElements/v) }

// tokenLogProbs returns out [B, T] with out[b, t] = log_softmax(h[b, t-1] · wᵀ / temperature)[tokens[b, t]] for
// t >= max(from, 1), out[b, 0] = log(1/V) when from is 0 (a zero hidden state; callers mask it), and out[b, t] = 0
// for t < from: the positions before from are not projected at all, forward or backward (TRL's logits_to_keep).
// h [B, T, D] are the final (normed) hidden states, w [V, D] the output projection, tokens [B, T] the ids. A
// bfloat16 w (bf16) makes the products with it take bfloat16 inputs; the logits, their log-softmax and the output
// are float32 either way, and so is w's gradient (dw) until it is rounded to w's dtype at the end.
//
// The logits of rows positions at a time are formed, reduced to their log-sum-exp and the picked entry, and
// dropped, so no [B, T, V] tensor exists: the forward pass holds one [rows, V] chunk, and so does the backward,
// which recomputes each chunk's logits from h and w (when there are several; a single chunk's are kept) and
// applies the closed-form gradient of log_softmax followed by a pick, dlogits = v ⊙ (onehot(target) -
// softmax(logits)) / temperature, then dh = dlogits · w and dw = dlogitsᵀ · h, chunk by chunk.
//
// GoMLX attaches custom gradients to single tensors only (IdentityWithCustomGradient), so the output is
// lp + link, where lp is computed from stopped copies of h and w and the link is exactly zero:
// rowsum(h') - rowsum(h) over a custom identity h' of h, plus w'[0] - w[0] summed over a custom identity w' of
// w. The gradient arriving at h' is dL/dout broadcast over D; h's custom gradient reads dL/dout from it and
// computes dh and dw together, keeping dw for w's custom gradient. GoMLX's reverse pass visits nodes from the
// last created to the first (rev_autodiff.go), so w', created before h', is reached after it. When w is not
// trained, w's custom gradient is never asked for and the backend never runs dw's nodes (no output uses them).
func tokenLogProbs(h, w, tokens *Node, temperature float64, rows, from int) *Node {
	g := h.Graph()
	b, t, d := h.Shape().Dim(0), h.Shape().Dim(1), h.Shape().Dim(2)
	from = min(max(from, 0), t-1)
	kept := t - from // positions computed per row
	n := b * kept
	rows = min(max(rows, 1), n)
	scale := 1 / temperature
	bf16 := w.DType() == dtypes.BFloat16 // the products on bfloat16 inputs, float32 out (bf16.go)
	hFixed, wFixed := StopGradient(h), StopGradient(w)
	target := Reshape(ConvertDType(SliceAxis(tokens, 1, AxisRange(from, t)), dtypes.Int32), n)

	// Row (b, t) of src is the hidden state that predicts tokens[b, from + t]: h[b, from + t - 1], zeros at
	// position 0.
	var src *Node
	if from == 0 {
		src = Concatenate([]*Node{Zeros(g, shapes.Make(h.DType(), b, 1, d)), SliceAxis(hFixed, 1, AxisRange(0, t-1))}, 1)
	} else {
		src = SliceAxis(hFixed, 1, AxisRange(from-1, t-1))
	}
	src = StopGradient(Reshape(src, n, d))
	type chunk struct {
		x, idx, logits, maxLogit, logSum *Node
		from, to                         int
	}
	logits := func(x *Node) *Node {
		l := dot(bf16, x, []int{1}, nil, wFixed, []int{1}, nil) // [rows, V]
		if temperature != 1 {
			l = MulScalar(l, scale)
		}
		return l
	}
	var chunks []chunk
	var parts []*Node
	for from := 0; from < n; from += rows {
		to := min(from+rows, n)
		c := chunk{from: from, to: to, x: SliceAxis(src, 0, AxisRange(from, to))}
		r := to - from
		c.idx = Concatenate([]*Node{Iota(g, shapeInt32(r, 1), 0), Reshape(SliceAxis(target, 0, AxisRange(from, to)), r, 1)}, 1) // [r, 2]
		l := logits(c.x)
		c.logits = l
		// As GoMLX's LogSoftmax, value for value: (x - max) - log(sum(exp(x - max))).
		c.maxLogit = ReduceAndKeep(l, ReduceMax, -1)                          // [r, 1]
		c.logSum = Log(ReduceAndKeep(Exp(Sub(l, c.maxLogit)), ReduceSum, -1)) // [r, 1]
		picked := Gather(l, c.idx)                                            // [r]
		parts = append(parts, Sub(Sub(picked, Reshape(c.maxLogit, r)), Reshape(c.logSum, r)))
		chunks = append(chunks, c)
	}
	// GoMLX's reverse pass honours a StopGradient only on a node's direct inputs: stopping lp keeps it from
	// building (dead) gradients of the forward ops, and the slices among them would need Pad, which simplego lacks.
	lp := Reshape(Concatenate(parts, 0), b, kept)
	if from > 0 {
		lp = Concatenate([]*Node{Zeros(g, shapes.Make(lp.DType(), b, from)), lp}, 1)
	}
	lp = StopGradient(lp)

	var dw *Node
	wc := IdentityWithCustomGradient(w, func(_, _ *Node) *Node {
		if dw == nil {
			panic("model: the output projection's log-prob gradient is computed with the hidden states'; they are not differentiated here")
		}
		return ConvertDType(dw, w.DType())
	})
	hc := IdentityWithCustomGradient(h, func(_, vb *Node) *Node {
		v := Reshape(SliceAxis(SliceAxis(vb, -1, AxisRange(0, 1)), 1, AxisRange(from, t)), n) // dL/dout per kept position
		var dsrc []*Node
		dw = nil
		for _, c := range chunks {
			r := c.to - c.from
			vc := SliceAxis(v, 0, AxisRange(c.from, c.to))
			l := c.logits // one chunk: its forward logits are at most a chunk's memory; kept rather than recomputed
			if len(chunks) > 1 {
				l = logits(c.x)
			}
			p := Exp(Sub(Sub(l, c.maxLogit), c.logSum))                             // softmax [r, V]
			dl := ScatterSum(Mul(p, Neg(Reshape(vc, r, 1))), c.idx, vc, true, true) // v ⊙ (onehot - p)
			if temperature != 1 {
				dl = MulScalar(dl, scale)
			}
			dsrc = append(dsrc, dot(bf16, dl, []int{1}, nil, wFixed, []int{0}, nil)) // [r, D]
			dwc := DotGeneral(dl, []int{0}, nil, c.x, []int{0}, nil)                 // [V, D]
			if dw == nil {
				dw = dwc
			} else {
				dw = Add(dw, dwc)
			}
		}
		ds := Reshape(Concatenate(dsrc, 0), b, kept, d)
		// src[b, t] = h[b, from+t-1], so dh[b, t] = dsrc[b, t+1-from]; nothing reaches h[b, T-1] nor, when from > 1,
		// h[b, :from-1].
		tail := Zeros(g, shapes.Make(h.DType(), b, 1, d))
		if from == 0 {
			return Concatenate([]*Node{SliceAxis(ds, 1, AxisRange(1, kept)), tail}, 1)
		}
		if from == 1 {
			return Concatenate([]*Node{ds, tail}, 1)
		}
		return Concatenate([]*Node{Zeros(g, shapes.Make(h.DType(), b, from-1, d)), ds, tail}, 1)
	})
	first := Zeros(g, shapeInt32(1, 1))
	link := Sub(ReduceSum(hc, -1), ReduceSum(hFixed, -1))                           // [B, T] of zeros
	linkW := asFloat32(ReduceAllSum(Sub(Gather(wc, first), Gather(wFixed, first)))) // 0
	return Add(Add(lp, link), linkW)
}

// outputWeight is the output projection [V, D]: lm_head's weight, or embed_tokens' when tied (bfloat16 with bf16). ok is false when a
// LoRA adapter sits on it (then only linear computes it).
func (m *Model) outputWeight(ctx *context.Context, g *Graph) (w *Node, ok bool) {
	wctx := ctx.In("lm_head")
	if m.Config.TieWordEmbeddings {
		wctx = ctx.In("model").In("embed_tokens")
	}
	if wctx.GetVariableByScopeAndName(wctx.In("lora_A").Scope(), "weight") != nil {
		return nil, false
	}
	w = variableNode(wctx, g, "weight")
	if isBF16(ctx) {
		w = ConvertDType(w, dtypes.BFloat16) // a no-op on a frozen (bfloat16) weight; a trained one's master stays float32
	}
	return m.tiedTokenWeight(ctx, w), true
}
