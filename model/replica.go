package model

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Replica is a copy of a model's weights on another backend, so that one phase of a run (GRPO's sampling, the
// config key sampling_engine) runs on another engine than the model trains on, as TRL samples on vLLM and syncs
// the trained weights to it. Model is the copy, a Model of its own that samples (Policy, Generate) on its
// backend; Refresh copies into it what training changes since: the trainable variables of the source (with an
// adapter, its LoRA matrices and trainable token rows; without one, every weight). The source's optimizer state
// and random state stay where they are.
type Replica struct {
	// Model is the copy, on the backend NewReplica was given.
	Model *Model

	sync  []replicaVar // what Refresh copies: the source's trainable variables and the copy's
	bytes int64        // their size
}

// replicaVar is one variable that a refresh copies.
type replicaVar struct{ src, dst *context.Variable }

// NewReplica copies m's weights (the model's variables, its adapter and its generation config) onto backend. With
// bf16 the copy samples in bfloat16 (SetBF16): it never trains, so every weight of it is frozen and its base
// weights are all stored in bfloat16, the ones the source trains rounded again at each Refresh (the adapter and
// the trainable token rows stay float32, as under bf16: true); without it, in float32 (bfloat16 weights of m
// widened exactly). It fails with bf16 on the simplego engine (ErrBF16SimpleGo).
func NewReplica(m *Model, backend backends.Backend, bf16 bool) (*Replica, error) {
	if backend == nil {
		return nil, errors.New("model: replica on a nil backend")
	}
	c, err := newModel(backend, &m.Config)
	if err != nil {
		return nil, err
	}
	c.GenerationConfig = m.GenerationConfig
	if m.lora != nil {
		l := *m.lora
		l.TargetModules, l.TrainableTokenIndices = slices.Clone(l.TargetModules), slices.Clone(l.TrainableTokenIndices)
		c.lora = &l
		c.Ctx.InAbsPath(context.RootScope).SetParam(loraDropoutParam, l.Dropout)
	}
	r := &Replica{Model: c}
	for v := range m.Ctx.IterVariables() {
		if !isModelScope(v.Scope()) {
			continue
		}
		value, err := v.Value()
		if err != nil {
			return nil, fmt.Errorf("model: replica of %s: %w", v.ScopeAndName(), err)
		}
		local, err := value.LocalClone()
		if err != nil {
			return nil, fmt.Errorf("model: replica of %s: %w", v.ScopeAndName(), err)
		}
		dst := c.Ctx.InAbsPath(v.Scope()).Checked(false).VariableWithValue(v.Name(), local).SetTrainable(v.Trainable && !bf16)
		if v.Trainable {
			r.sync = append(r.sync, replicaVar{src: v, dst: dst})
			r.bytes += int64(local.Memory())
		}
	}
	if err := c.SetBF16(bf16); err != nil {
		return nil, fmt.Errorf("model: replica: %w", err)
	}
	return r, nil
}

// isModelScope reports whether a variable of a model's context is one of the model's own (the Hugging Face
// tensors under /model and /lm_head, the adapter's beside them), not a trainer's (optimizer state, random state).
func isModelScope(scope string) bool {
	return scope == "/model" || strings.HasPrefix(scope, "/model/") || scope == "/lm_head"
}

// Refresh copies the source's trainable variables into the copy: after it the copy samples what the source would.
// The base weights under an adapter are frozen and are copied once, by NewReplica.
func (r *Replica) Refresh() error {
	for _, v := range r.sync {
		value, err := v.src.Value()
		if err != nil {
			return fmt.Errorf("model: refresh %s: %w", v.src.ScopeAndName(), err)
		}
		local, err := value.LocalClone()
		if err != nil {
			return fmt.Errorf("model: refresh %s: %w", v.src.ScopeAndName(), err)
		}
		if v.dst.Shape().DType == dtypes.BFloat16 && local.DType() == dtypes.Float32 { // a bfloat16 copy of a trained weight
			data, err := tensors.CopyFlatData[float32](local)
			if err != nil {
				return fmt.Errorf("model: refresh %s: %w", v.src.ScopeAndName(), err)
			}
			local = tensors.FromFlatDataAndDimensions(toBF16(data), local.Shape().Dimensions...)
		}
		if err := v.dst.SetValue(local); err != nil {
			return fmt.Errorf("model: refresh %s: %w", v.src.ScopeAndName(), err)
		}
	}
	return nil
}

// Synced says what a Refresh copies: the number of tensors and their bytes.
func (r *Replica) Synced() (tensors int, bytes int64) { return len(r.sync), r.bytes }
