package tokenizer

import (
	"container/heap"
	"slices"
	"unicode"

	"github.com/dlclark/regexp2"
)

// tiktoken-go merges a pre-tokenizer piece in time quadratic in its length
// (a linear scan for the lowest rank and a slice delete per merge), so one
// long run of spaces or punctuation in a tool's output (the split pattern
// keeps such runs whole) would take seconds. Text that may hold such a piece
// takes this path instead: the same split, and the same merge rule (lowest
// rank first, leftmost on ties) driven by a heap, O(n log n). Text without a
// long run, nearly all of it, goes through tiktoken-go unchanged.
// TestLongPiecePathMatchesTiktoken and FuzzRoundTrip check that both paths
// give the same ids.

// maxRun is the longest run of one character class (letters, whitespace,
// other non-digits) that goes to tiktoken-go. Every piece of the split pattern
// lies within at most two such runs plus a character, so pieces there stay
// under 2*maxRun+1 runes.
const maxRun = 128

// hasLongRun reports whether text has a run of more than maxRun runes of one class.
func hasLongRun(text string) bool {
	const (
		letter = iota
		space
		other
		digit
	)
	class, run := -1, 0
	for _, r := range text {
		c := other
		switch {
		case unicode.IsLetter(r):
			c = letter
		case unicode.IsSpace(r):
			c = space
		case unicode.IsNumber(r):
			c = digit // each digit is its own piece
		}
		if c == class {
			run++
		} else {
			class, run = c, 1
		}
		if run > maxRun && class != digit {
			return true
		}
	}
	return false
}

// encodeSplit splits text with the pre-tokenizer pattern and merges each
// piece with mergePiece.
func (t *Tokenizer) encodeSplit(ids []int, text string) ([]int, error) {
	m, err := t.split.FindStringMatch(text)
	for ; m != nil && err == nil; m, err = t.split.FindNextMatch(m) {
		piece := m.String()
		if id, ok := t.encoder[piece]; ok {
			ids = append(ids, id)
			continue
		}
		b := []byte(piece)
		if t.nMissing > 0 {
			// Hugging Face's BPE drops a symbol that is not in the vocabulary (there is no unk token); the
			// symbols around it become neighbours and may merge.
			b = slices.DeleteFunc(b, func(c byte) bool { return t.missing[c] })
			if len(b) == 0 {
				continue
			}
		}
		ids = mergePiece(ids, b, t.encoder)
	}
	return ids, err
}

// mergePiece appends the BPE ids of piece: repeatedly merge the adjacent pair
// whose concatenation has the lowest rank (leftmost among equal ranks), as
// tiktoken does, using a heap of candidate pairs and a linked list of parts.
func mergePiece(ids []int, piece []byte, ranks map[string]int) []int {
	n := len(piece)
	next := make([]int, n) // next[i]: start of the part after the part starting at i (n at the end)
	prev := make([]int, n)
	alive := make([]bool, n)
	for i := range n {
		next[i], prev[i], alive[i] = i+1, i-1, true
	}
	end := func(i int) int { return next[i] } // a part [i, next[i])
	h := &pairHeap{}
	push := func(left int) {
		if left < 0 || next[left] >= n {
			return
		}
		e := end(next[left])
		if r, ok := ranks[string(piece[left:e])]; ok {
			heap.Push(h, pair{rank: r, left: left, end: e})
		}
	}
	for i := 0; i+1 < n; i++ {
		push(i)
	}
	for h.Len() > 0 {
		p := heap.Pop(h).(pair)
		if !alive[p.left] || next[p.left] >= n || end(next[p.left]) != p.end {
			continue // a part of this pair has changed since it was pushed
		}
		right := next[p.left]
		alive[right] = false
		next[p.left] = next[right]
		if next[right] < n {
			prev[next[right]] = p.left
		}
		push(prev[p.left])
		push(p.left)
	}
	for i := 0; i < n; i = next[i] {
		ids = append(ids, ranks[string(piece[i:next[i]])])
	}
	return ids
}

type pair struct{ rank, left, end int }

type pairHeap []pair

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(i, j int) bool {
	if h[i].rank != h[j].rank {
		return h[i].rank < h[j].rank
	}
	return h[i].left < h[j].left
}
func (h pairHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pairHeap) Push(x any)   { *h = append(*h, x.(pair)) }
func (h *pairHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func compileSplit(pattern string) (*regexp2.Regexp, error) {
	return regexp2.Compile(pattern, regexp2.None)
}
