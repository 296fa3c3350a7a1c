package model

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// SaveTensors writes float32 tensors to a safetensors file under the given
// names (optimizer state, for instance); LoadTensors reads them back.
func SaveTensors(path string, named map[string]*tensors.Tensor) error {
	all := make([]stTensor, 0, len(named))
	for name, t := range named {
		data, err := tensors.CopyFlatData[float32](t)
		if err != nil {
			return fmt.Errorf("save tensors: %s: %w", name, err)
		}
		all = append(all, stTensor{name: name, shape: t.Shape().Dimensions, data: data})
	}
	return writeSafetensors(path, all, "F32")
}

// LoadTensors reads every tensor of a safetensors file as float32.
func LoadTensors(path string) (map[string]*tensors.Tensor, error) {
	st, err := openSafetensors(path)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	out := make(map[string]*tensors.Tensor, len(st.entries))
	for name, e := range st.entries {
		data, err := st.readF32(name, e.Shape)
		if err != nil {
			return nil, err
		}
		out[name] = tensors.FromFlatDataAndDimensions(data, e.Shape...)
	}
	return out, nil
}
