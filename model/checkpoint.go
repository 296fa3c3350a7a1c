package model

import (
	"fmt"
	"os"
	"path/filepath"
)

// What a converter from another checkpoint format (package gguf/convert) builds on: the configuration's tensors by
// name and shape, read from a model directory (OpenCheckpoint, Checkpoint.Read) and written to one
// (WriteCheckpoint).

// Weight is one tensor of a model in Hugging Face's layout.
type Weight struct {
	Name  string // e.g. model.layers.0.self_attn.q_proj.weight
	Shape []int
}

// Weights lists the configuration's tensors in Hugging Face order (lm_head only when the embeddings are untied).
func (c *Config) Weights() []Weight {
	ps := c.params()
	ws := make([]Weight, len(ps))
	for i, p := range ps {
		ws[i] = Weight{Name: p.name, Shape: p.shape}
	}
	return ws
}

// Read returns w's values as float32, checking its shape.
func (ck *Checkpoint) Read(w Weight) ([]float32, error) {
	return ck.read(param{name: w.Name, shape: w.Shape})
}

// WriteCheckpoint writes cfg as a model directory dir (which must exist): config.json, the generation_config.json
// transformers derives from it, and model.safetensors in float32, where data[i] holds the values of
// cfg.Weights()[i].
func WriteCheckpoint(dir string, cfg *Config, data [][]float32) error {
	ws := cfg.Weights()
	if len(data) != len(ws) {
		return fmt.Errorf("write checkpoint %s: %d tensors for the %d of the configuration", dir, len(data), len(ws))
	}
	cfgJSON, err := cfg.JSON()
	if err != nil {
		return err
	}
	gen, err := cfg.defaultGenerationConfig()
	if err != nil {
		return err
	}
	for name, b := range map[string][]byte{"config.json": cfgJSON, "generation_config.json": gen} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	all := make([]stTensor, len(ws))
	for i, w := range ws {
		all[i] = stTensor{name: w.Name, shape: w.Shape, data: data[i]}
	}
	return writeSafetensors(filepath.Join(dir, "model.safetensors"), all, "F32")
}
