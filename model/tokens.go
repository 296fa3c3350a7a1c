package model

// Trainable tokens, as peft's LoraConfig(trainable_token_indices=[...]) (peft/tuners/trainable_tokens): beside a
// LoRA adapter, the embedding rows of a few listed token ids train while the rest of the embedding stays frozen.
// This is how a token added to the vocabulary (mcprl model import --add-tokens, whose rows start as the mean of
// all rows) can become likely at all: with the embedding frozen, its row, tied to the lm_head, gives it a mean
// logit that LoRA on the projections cannot lift to the top.
//
// As peft, the adapter holds the listed rows' values, not a difference: the tensor
// "base_model.model.model.embed_tokens.token_adapter.trainable_tokens_delta" [len(indices), hidden] starts as a
// copy of those rows (peft's init_weights=True) and replaces them in the forward pass (peft's index_copy). Every
// other row is the base row, bit for bit. With tied embeddings (tie_word_embeddings, as SmolLM2's) the lm_head's
// rows of those ids are the same values, as peft ties its lm_head wrapper to the embedding's; with untied ones
// the lm_head is untouched, as peft's list form wraps the input embedding only. Merge writes the values into the
// embedding (peft's merge). adapter_config.json lists the ids as "trainable_token_indices".
//
// Variable: scope /model/embed_tokens/token_adapter, name "trainable_tokens_delta" (trainable).

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads like the formulas.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// tokenAdapterTensor is the HF name (without peft's prefix) of the trainable rows.
const tokenAdapterTensor = "model.embed_tokens.token_adapter.trainable_tokens_delta"

// checkTokenIndices refuses ids outside [0, vocab) and repeated ids.
func checkTokenIndices(ids []int, vocab int) error {
	seen := map[int]bool{}
	for _, id := range ids {
		if id < 0 || id >= vocab {
			return fmt.Errorf("lora: trainable_token_indices: id %d is outside the vocabulary [0, %d)", id, vocab)
		}
		if seen[id] {
			return fmt.Errorf("lora: trainable_token_indices: id %d is listed twice", id)
		}
		seen[id] = true
	}
	return nil
}

// setTokenRows stores the trainable rows' values [n, hidden].
func (m *Model) setTokenRows(values []float32, n int) error {
	scope, name := scopeOf(tokenAdapterTensor)
	t := tensors.FromFlatDataAndDimensions(values, n, m.Config.HiddenSize)
	if v := m.Ctx.GetVariableByScopeAndName(scope, name); v != nil {
		return v.SetValue(t)
	}
	m.Ctx.InAbsPath(scope).Checked(false).VariableWithValue(name, t)
	return nil
}

// initTokenRows copies the listed rows of the embedding into the trainable rows (peft's init_weights=True).
func (m *Model) initTokenRows(ids []int) error {
	if len(ids) == 0 {
		return nil
	}
	w, _, err := m.Tensor("model.embed_tokens.weight")
	if err != nil {
		return fmt.Errorf("trainable tokens: %w", err)
	}
	d := m.Config.HiddenSize
	rows := make([]float32, 0, len(ids)*d)
	for _, id := range ids {
		rows = append(rows, w[id*d:(id+1)*d]...)
	}
	return m.setTokenRows(rows, len(ids))
}

// tokenRows returns the trainable rows [n, D] and their ids, or nil without trainable tokens.
func (m *Model) tokenRows(ctx *context.Context, g *Graph) (*Node, []int) {
	if m.lora == nil || len(m.lora.TrainableTokenIndices) == 0 {
		return nil, nil
	}
	scope, name := scopeOf(tokenAdapterTensor)
	v := ctx.GetVariableByScopeAndName(scope, name)
	if v == nil {
		panic("model: trainable tokens without their variable " + scope + "/" + name)
	}
	return v.ValueGraph(g), m.lora.TrainableTokenIndices
}

// tokenOneHot is [n, V] with a 1 at (k, ids[k]): multiplying by it moves n values to their ids' places exactly
// (each output is one product by 1 plus zeros).
func tokenOneHot(g *Graph, ids []int, vocab int) *Node {
	p := make([]float32, len(ids)*vocab)
	for k, id := range ids {
		p[k*vocab+id] = 1
	}
	return Const(g, tensors.FromFlatDataAndDimensions(p, len(ids), vocab))
}

// tokenMask is a bool [V] that is true at ids.
func tokenMask(g *Graph, ids []int, vocab int) *Node {
	mask := make([]bool, vocab)
	for _, id := range ids {
		mask[id] = true
	}
	return Const(g, mask)
}

// embed looks up the input embeddings of tokens [B, T]: [B, T, D], the trainable rows replacing the base's.
func (m *Model) embed(ctx *context.Context, tokens *Node) *Node {
	g := tokens.Graph()
	ids := ExpandAxes(ConvertDType(tokens, dtypes.Int32), -1) // [B, T, 1]
	// The rows are bfloat16 with bf16 (bf16.go), and widened exactly.
	h := asFloat32(Gather(variableNode(ctx.In("model").In("embed_tokens"), g, "weight"), ids))
	rows, listed := m.tokenRows(ctx, g)
	if rows == nil {
		return h
	}
	idx32 := make([]int32, len(listed))
	for k, id := range listed {
		idx32[k] = int32(id)
	}
	dims := slices.Clone(ids.Shape().Dimensions)
	dims[len(dims)-1] = len(listed)
	hit := Equal(BroadcastToDims(ids, dims...), BroadcastToDims(ExpandLeftToRank(Const(g, idx32), len(dims)), dims...)) // [B, T, n]
	oneHot := ConvertDType(hit, h.DType())
	replaced := DotGeneral(oneHot, []int{2}, nil, rows, []int{0}, nil) // [B, T, D]
	hitAny := GreaterThan(ReduceAndKeep(oneHot, ReduceMax, -1), ScalarZero(g, h.DType()))
	return Where(BroadcastToDims(hitAny, h.Shape().Dimensions...), replaced, h)
}

// tiedTokenLogits replaces the logits [..., V] of the trainable ids by h [..., D] · rows when the embeddings are
// tied (the lm_head is the embedding); otherwise it returns logits unchanged.
func (m *Model) tiedTokenLogits(ctx *context.Context, h, logits *Node) *Node {
	if !m.Config.TieWordEmbeddings {
		return logits
	}
	g := h.Graph()
	rows, listed := m.tokenRows(ctx, g)
	if rows == nil {
		return logits
	}
	v := m.Config.VocabSize
	cols := DotGeneral(h, []int{h.Rank() - 1}, nil, rows, []int{1}, nil)                              // [..., n]
	spread := DotGeneral(cols, []int{cols.Rank() - 1}, nil, tokenOneHot(g, listed, v), []int{0}, nil) // [..., V]
	return Where(BroadcastToDims(ExpandLeftToRank(tokenMask(g, listed, v), logits.Rank()), logits.Shape().Dimensions...), spread, logits)
}

// tiedTokenWeight is the output projection w [V, D] with the trainable rows in place when the embeddings are tied,
// for the chunked log-prob graphs, which take the projection as a tensor; otherwise w.
func (m *Model) tiedTokenWeight(ctx *context.Context, w *Node) *Node {
	if !m.Config.TieWordEmbeddings {
		return w
	}
	g := w.Graph()
	rows, listed := m.tokenRows(ctx, g)
	if rows == nil {
		return w
	}
	v := m.Config.VocabSize
	spread := DotGeneral(tokenOneHot(g, listed, v), []int{0}, nil, rows, []int{0}, nil) // [V, D]
	mask := BroadcastToDims(Reshape(tokenMask(g, listed, v), v, 1), w.Shape().Dimensions...)
	// With bf16 the frozen w is bfloat16 and the rows are rounded to it here, as the product would round them.
	return Where(mask, ConvertDType(spread, w.DType()), w)
}

// mergeTokenRows writes the trainable rows into the embedding and deletes them.
func (m *Model) mergeTokenRows() error {
	ids := m.lora.TrainableTokenIndices
	if len(ids) == 0 {
		return nil
	}
	rows, _, err := m.Tensor(tokenAdapterTensor)
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	w, shape, err := m.Tensor("model.embed_tokens.weight")
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	d := m.Config.HiddenSize
	for k, id := range ids {
		copy(w[id*d:(id+1)*d], rows[k*d:(k+1)*d])
	}
	scope, name := scopeOf("model.embed_tokens.weight")
	if err := m.Ctx.GetVariableByScopeAndName(scope, name).SetValue(tensors.FromFlatDataAndDimensions(w, shape...)); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	scope, name = scopeOf(tokenAdapterTensor)
	if err := m.Ctx.DeleteVariable(scope, name); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	return nil
}

// parseTokenIndices reads adapter_config.json's trainable_token_indices: null, a list of ids, or peft's dict form
// naming the input embedding only ({"embed_tokens": [...]}).
func parseTokenIndices(raw json.RawMessage) ([]int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var ids []int
	if err := json.Unmarshal(raw, &ids); err == nil {
		return ids, nil
	}
	var byLayer map[string][]int
	if err := json.Unmarshal(raw, &byLayer); err != nil {
		return nil, fmt.Errorf("trainable_token_indices %s: not a list of ids nor {layer: ids}", raw)
	}
	for layer, l := range byLayer {
		if layer != "embed_tokens" && layer != "model.embed_tokens" {
			return nil, fmt.Errorf("trainable_token_indices: layer %q is not supported (embed_tokens only)", layer)
		}
		ids = l
	}
	return ids, nil
}
