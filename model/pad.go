package model

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// MinBucket is the smallest sequence-length bucket.
const MinBucket = 16

// Bucket rounds a sequence length up to its shape bucket, the next power of two (at least MinBucket), so that
// graphs are compiled for a handful of shapes and reused.
func Bucket(n int) int {
	b := MinBucket
	for b < n {
		b *= 2
	}
	return b
}

// PadBatch packs token sequences into int32 tensors tokens [B, T] and attentionMask [B, T] (1 = real token),
// padding with padID on the left (left=true) or the right. length 0 means Bucket(longest sequence).
// A sequence longer than length is an error. Use the same length and side for every per-token array of the batch
// (see PadFloats) so that they line up with TokenLogProbs' output.
func PadBatch(seqs [][]int, length, padID int, left bool) (tokens, attentionMask *tensors.Tensor, err error) {
	longest := 0
	for _, s := range seqs {
		longest = max(longest, len(s))
	}
	if length == 0 {
		length = Bucket(longest)
	}
	if longest > length {
		return nil, nil, fmt.Errorf("pad batch: a sequence has %d tokens, more than the length %d", longest, length)
	}
	tok := make([]int32, len(seqs)*length)
	mask := make([]int32, len(seqs)*length)
	for b, s := range seqs {
		off := b * length
		if left {
			off += length - len(s)
		}
		for i := range tok[b*length : (b+1)*length] {
			tok[b*length+i] = int32(padID)
		}
		for i, id := range s {
			tok[off+i] = int32(id)
			mask[off+i] = 1
		}
	}
	return tensors.FromFlatDataAndDimensions(tok, len(seqs), length), tensors.FromFlatDataAndDimensions(mask, len(seqs), length), nil
}

// PadFloats packs per-token float32 rows (loss masks, old log-probs, advantages per token) into a [B, T] tensor
// aligned as PadBatch aligns the tokens: row b's value i goes where token i of sequence b went. Padding is 0.
func PadFloats(rows [][]float32, length int, left bool) (*tensors.Tensor, error) {
	out := make([]float32, len(rows)*length)
	for b, r := range rows {
		if len(r) > length {
			return nil, fmt.Errorf("pad floats: row %d has %d values, more than the length %d", b, len(r), length)
		}
		off := b * length
		if left {
			off += length - len(r)
		}
		copy(out[off:], r)
	}
	return tensors.FromFlatDataAndDimensions(out, len(rows), length), nil
}
