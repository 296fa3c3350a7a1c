package tokenizer

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	"github.com/pkoukk/tiktoken-go"
	xunicode "golang.org/x/text/encoding/unicode"
	"golang.org/x/text/unicode/norm"
)

// AddedToken is one entry of tokenizer.json's added_tokens: a string matched
// whole in the raw text and given its own id.
type AddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// Tokenizer is a loaded byte-level BPE tokenizer. It is safe for concurrent use.
type Tokenizer struct {
	dir string

	core     *tiktoken.Tiktoken // ordinary BPE over the vocabulary's ranks
	pattern  string             // the pre-tokenizer split regex
	digits   bool               // every digit is its own piece first (a Digits(individual_digits) pre-tokenizer)
	missing  [256]bool          // bytes without a token: dropped from the text, as HF's BPE drops unknown symbols
	nMissing int                // how many bytes are missing
	split    *regexp2.Regexp    // pattern, for text with long pieces (longpiece.go)
	nfc      bool               // the normalizer is NFC
	addedRe  *regexp.Regexp     // leftmost-longest alternation of added tokens; nil if none
	added    []AddedToken       // in tokenizer.json order
	addedIDs map[string]int     // added token content -> id

	idBytes  [][]byte       // id -> raw bytes (added tokens: their content)
	encoder  map[string]int // raw bytes -> id of the BPE vocabulary
	special  []bool         // id -> added token marked special
	numMerge int            // merges in the BPE model

	eos, pad int
	config   tokenizerConfig
	rawJSON  []byte // tokenizer.json as read, for Reduce
	rawCfg   []byte // tokenizer_config.json as read, for Reduce
}

// tokenizerJSON is the part of tokenizer.json that this package reads.
type tokenizerJSON struct {
	AddedTokens  []AddedToken    `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Decoder      json.RawMessage `json:"decoder"`
	Model        struct {
		Type         string          `json:"type"`
		Vocab        map[string]int  `json:"vocab"`
		Merges       json.RawMessage `json:"merges"`
		ByteFallback bool            `json:"byte_fallback"`
	} `json:"model"`
}

// tokenizerConfig is the part of tokenizer_config.json that this package reads.
type tokenizerConfig struct {
	ChatTemplate json.RawMessage `json:"chat_template"`
	EOSToken     json.RawMessage `json:"eos_token"`
	PadToken     json.RawMessage `json:"pad_token"`
	BOSToken     json.RawMessage `json:"bos_token"`
	UnkToken     json.RawMessage `json:"unk_token"`
}

// Load reads a Hugging Face tokenizer directory: tokenizer.json (byte-level
// BPE model, NFC or no normalizer, a Split + ByteLevel pre-tokenizer) and
// tokenizer_config.json (eos_token, pad_token, chat_template).
func Load(dir string) (*Tokenizer, error) {
	t, err := LoadFS(os.DirFS(dir), ".")
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", dir, err)
	}
	t.dir = dir
	return t, nil
}

// LoadFS is Load from a directory of a file system (an embed.FS, say).
func LoadFS(fsys fs.FS, dir string) (*Tokenizer, error) {
	rawJSON, err := fs.ReadFile(fsys, path.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	rawCfg, err := fs.ReadFile(fsys, path.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return nil, err
	}
	t, err := Parse(rawJSON, rawCfg)
	if err != nil {
		return nil, err
	}
	t.dir = dir
	return t, nil
}

// Parse reads a tokenizer from the contents of tokenizer.json and tokenizer_config.json, as LoadFS reads them
// from files.
func Parse(rawJSON, rawCfg []byte) (*Tokenizer, error) {
	var tj tokenizerJSON
	if err := json.Unmarshal(rawJSON, &tj); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if tj.Model.Type != "BPE" {
		return nil, fmt.Errorf("tokenizer.json: model type %q, want BPE", tj.Model.Type)
	}
	if tj.Model.ByteFallback {
		return nil, fmt.Errorf("tokenizer.json: byte_fallback BPE is not byte-level BPE")
	}
	t := &Tokenizer{rawJSON: rawJSON, rawCfg: rawCfg}
	var err error
	if t.nfc, err = parseNormalizer(tj.Normalizer); err != nil {
		return nil, err
	}
	if t.pattern, t.digits, err = parsePreTokenizer(tj.PreTokenizer); err != nil {
		return nil, err
	}
	if err := checkByteLevel(tj.Decoder, "decoder"); err != nil {
		return nil, err
	}
	merges, err := parseMerges(tj.Model.Merges)
	if err != nil {
		return nil, err
	}
	t.numMerge = len(merges)

	// The BPE vocabulary, keyed by raw bytes: the byte tokens and the merges' results. A vocabulary entry that is
	// neither (a special token listed in the vocab, as SmolLM2's are) is never produced by the BPE; it is an added
	// token or no token at all. tiktoken merges the adjacent pair whose concatenation has the lowest rank; Hugging
	// Face merges the pair with the lowest merge index. They agree when ids grow with merge order, which is checked
	// here (and holds for GPT-2-style vocabularies such as Qwen's and SmolLM2's).
	maxID := -1
	vocab := make(map[string]int, len(tj.Model.Vocab))
	for tok, id := range tj.Model.Vocab {
		b, err := byteLevelDecode(tok)
		if err != nil {
			return nil, fmt.Errorf("tokenizer.json: vocab: %w", err)
		}
		if prev, dup := vocab[string(b)]; dup {
			return nil, fmt.Errorf("tokenizer.json: vocab: ids %d and %d have the same bytes", prev, id)
		}
		vocab[string(b)] = id
		maxID = max(maxID, id)
	}
	t.encoder = make(map[string]int, len(vocab))
	for b := 0; b < 256; b++ {
		if id, ok := vocab[string([]byte{byte(b)})]; ok {
			t.encoder[string([]byte{byte(b)})] = id
		} else {
			t.missing[b] = true
			t.nMissing++
		}
	}
	if t.nMissing > 64 {
		return nil, fmt.Errorf("tokenizer.json: vocab lacks %d of the 256 byte tokens: not byte-level BPE", t.nMissing)
	}
	last := -1
	for i, m := range merges {
		a, err1 := byteLevelDecode(m[0])
		b, err2 := byteLevelDecode(m[1])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("tokenizer.json: merge %d %q: not byte-level", i, m)
		}
		id, ok := vocab[string(a)+string(b)]
		if !ok {
			return nil, fmt.Errorf("tokenizer.json: merge %d %q: result not in vocab", i, m)
		}
		if id <= last {
			return nil, fmt.Errorf("tokenizer.json: merge %d %q makes id %d, not above the previous merge's %d: ranks are not merge order", i, m, id, last)
		}
		last = id
		t.encoder[string(a)+string(b)] = id
	}

	for _, a := range tj.AddedTokens {
		if a.LStrip || a.RStrip || a.SingleWord || a.Normalized {
			return nil, fmt.Errorf("tokenizer.json: added token %q: lstrip/rstrip/single_word/normalized are not supported", a.Content)
		}
		if a.Content == "" {
			return nil, fmt.Errorf("tokenizer.json: added token %d is empty", a.ID)
		}
		maxID = max(maxID, a.ID)
	}
	t.idBytes = make([][]byte, maxID+1)
	t.special = make([]bool, maxID+1)
	for b, id := range vocab {
		t.idBytes[id] = []byte(b)
	}
	t.added = tj.AddedTokens
	t.addedIDs = make(map[string]int, len(tj.AddedTokens))
	quoted := make([]string, 0, len(tj.AddedTokens))
	for _, a := range tj.AddedTokens {
		if t.idBytes[a.ID] != nil && string(t.idBytes[a.ID]) != a.Content {
			return nil, fmt.Errorf("tokenizer.json: added token %q reuses vocab id %d", a.Content, a.ID)
		}
		t.idBytes[a.ID] = []byte(a.Content)
		t.special[a.ID] = a.Special
		t.addedIDs[a.Content] = a.ID
		quoted = append(quoted, regexp.QuoteMeta(a.Content))
	}
	if len(quoted) > 0 {
		t.addedRe = regexp.MustCompile(strings.Join(quoted, "|"))
		t.addedRe.Longest()
	}

	if t.split, err = compileSplit(t.pattern); err != nil {
		return nil, fmt.Errorf("tokenizer.json: pre-tokenizer pattern: %w", err)
	}
	bpe, err := tiktoken.NewCoreBPE(t.encoder, map[string]int{}, t.pattern)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: pre-tokenizer pattern: %w", err)
	}
	t.core = tiktoken.NewTiktoken(bpe, nil, nil)

	if err := json.Unmarshal(rawCfg, &t.config); err != nil {
		return nil, fmt.Errorf("tokenizer_config.json: %w", err)
	}
	eos, err := tokenString(t.config.EOSToken)
	if err != nil || eos == "" {
		return nil, fmt.Errorf("tokenizer_config.json: eos_token missing or malformed")
	}
	var ok bool
	if t.eos, ok = t.TokenID(eos); !ok {
		return nil, fmt.Errorf("tokenizer_config.json: eos_token %q is not a token", eos)
	}
	t.pad = t.eos
	if pad, err := tokenString(t.config.PadToken); err == nil && pad != "" {
		if t.pad, ok = t.TokenID(pad); !ok {
			return nil, fmt.Errorf("tokenizer_config.json: pad_token %q is not a token", pad)
		}
	}
	return t, nil
}

// tokenString reads a tokenizer_config token field: a string, null, or an
// AddedToken object with "content".
func tokenString(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", err
	}
	return obj.Content, nil
}

func parseNormalizer(raw json.RawMessage) (bool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil
	}
	var n struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return false, fmt.Errorf("tokenizer.json: normalizer: %w", err)
	}
	if n.Type != "NFC" {
		return false, fmt.Errorf("tokenizer.json: normalizer %q is not supported (only NFC or none)", n.Type)
	}
	return true, nil
}

type preTokenizer struct {
	Type          string         `json:"type"`
	PreTokenizers []preTokenizer `json:"pretokenizers"`
	Pattern       struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior    string `json:"behavior"`
	Invert      bool   `json:"invert"`
	UseRegex    bool   `json:"use_regex"`
	AddPrefix   bool   `json:"add_prefix_space"`
	TrimOffsets bool   `json:"trim_offsets"`

	IndividualDigits bool `json:"individual_digits"`
}

// gpt2Pattern is the split regex of the ByteLevel pre-tokenizer with use_regex=true.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// parsePreTokenizer accepts the Qwen/Llama-3 form: Sequence[Split(Regex,
// Isolated), ByteLevel(use_regex=false)], the GPT-2 form ByteLevel(use_regex=true),
// and the StarCoder/SmolLM form Sequence[Digits(individual_digits=true),
// ByteLevel(use_regex=true)] (digits reports the last).
func parsePreTokenizer(raw json.RawMessage) (pattern string, digits bool, err error) {
	var p preTokenizer
	if err := json.Unmarshal(raw, &p); err != nil {
		return "", false, fmt.Errorf("tokenizer.json: pre_tokenizer: %w", err)
	}
	switch {
	case p.Type == "ByteLevel" && p.UseRegex && !p.AddPrefix:
		return gpt2Pattern, false, nil
	case p.Type == "Sequence" && len(p.PreTokenizers) == 2:
		s, b := p.PreTokenizers[0], p.PreTokenizers[1]
		if s.Type == "Split" && s.Pattern.Regex != nil && s.Behavior == "Isolated" && !s.Invert &&
			b.Type == "ByteLevel" && !b.UseRegex && !b.AddPrefix {
			return *s.Pattern.Regex, false, nil
		}
		if s.Type == "Digits" && s.IndividualDigits && b.Type == "ByteLevel" && b.UseRegex && !b.AddPrefix {
			return gpt2Pattern, true, nil
		}
	}
	return "", false, fmt.Errorf("tokenizer.json: pre_tokenizer %s is not supported (want Split(Regex, Isolated) + ByteLevel, ByteLevel, or Digits + ByteLevel)", raw)
}

func checkByteLevel(raw json.RawMessage, what string) error {
	var d struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &d); err != nil || d.Type != "ByteLevel" {
		return fmt.Errorf("tokenizer.json: %s %s is not ByteLevel", what, raw)
	}
	return nil
}

// parseMerges reads model.merges in either form: ["a b", ...] or [["a","b"], ...].
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	var pairs [][2]string
	if err := json.Unmarshal(raw, &pairs); err == nil {
		return pairs, nil
	}
	var lines []string
	if err := json.Unmarshal(raw, &lines); err != nil {
		return nil, fmt.Errorf("tokenizer.json: model.merges: %w", err)
	}
	pairs = make([][2]string, len(lines))
	for i, l := range lines {
		a, b, ok := strings.Cut(l, " ")
		if !ok {
			return nil, fmt.Errorf("tokenizer.json: merge %d %q has no space", i, l)
		}
		pairs[i] = [2]string{a, b}
	}
	return pairs, nil
}

// Encode returns the token ids of text, as Hugging Face's tokenizer(text)
// gives them for this tokenizer (no BOS/EOS added; added and special tokens
// in the text become their single ids). text is read as UTF-8; an invalid
// byte is encoded as U+FFFD (a Python str cannot hold one).
//
// Text with a long run of spaces, letters or punctuation (one long
// pre-tokenizer piece, where tiktoken-go's merge loop is quadratic) is merged
// with a heap instead, giving the same ids in O(n log n); see longpiece.go.
func (t *Tokenizer) Encode(text string) []int {
	ids := make([]int, 0, len(text)/3+1)
	for text != "" {
		loc := []int{len(text), len(text)}
		if t.addedRe != nil {
			if l := t.addedRe.FindStringIndex(text); l != nil {
				loc = l
			}
		}
		ids = t.appendOrdinary(ids, text[:loc[0]])
		if loc[1] > loc[0] {
			ids = append(ids, t.addedIDs[text[loc[0]:loc[1]]])
		}
		text = text[loc[1]:]
	}
	return ids
}

// EncodeOrdinary encodes text with the BPE alone: added-token strings in the
// text are encoded as ordinary text (split_special_tokens=True in HF terms).
func (t *Tokenizer) EncodeOrdinary(text string) []int {
	return t.appendOrdinary(nil, text)
}

func (t *Tokenizer) appendOrdinary(ids []int, text string) []int {
	if text == "" {
		return ids
	}
	if t.nfc {
		text = norm.NFC.String(text)
	}
	if t.digits {
		return t.appendDigitsSplit(ids, text)
	}
	return t.appendPieces(ids, text)
}

// appendDigitsSplit is the Digits(individual_digits=true) pre-tokenizer: each
// numeric character (Unicode category N, Rust's char::is_numeric) is a piece of
// its own, and the text between them is split by the pattern.
func (t *Tokenizer) appendDigitsSplit(ids []int, text string) []int {
	start := 0
	for i, r := range text {
		if !unicode.IsNumber(r) {
			continue
		}
		ids = t.appendPieces(ids, text[start:i])
		n := utf8.RuneLen(r)
		if n < 0 {
			n = 1
		}
		ids = t.appendPieces(ids, text[i:i+n])
		start = i + n
	}
	return t.appendPieces(ids, text[start:])
}

// appendPieces splits text with the pattern and merges each piece.
func (t *Tokenizer) appendPieces(ids []int, text string) []int {
	if text == "" {
		return ids
	}
	if hasLongRun(text) || (t.nMissing > 0 && t.hasMissing(text)) {
		if out, err := t.encodeSplit(ids, text); err == nil {
			return out
		}
	}
	return append(ids, t.core.EncodeOrdinary(text)...)
}

// hasMissing reports whether text holds a byte that has no token.
func (t *Tokenizer) hasMissing(text string) bool {
	for i := 0; i < len(text); i++ {
		if t.missing[text[i]] {
			return true
		}
	}
	return false
}

// DecodeBytes returns the bytes that ids stand for. Ids outside the
// vocabulary are skipped, as Hugging Face's decoder does.
func (t *Tokenizer) DecodeBytes(ids []int) []byte {
	var out []byte
	for _, id := range ids {
		if id >= 0 && id < len(t.idBytes) {
			out = append(out, t.idBytes[id]...)
		}
	}
	return out
}

// Decode returns the text of ids, special tokens included
// (skip_special_tokens=False). Byte sequences that are not valid UTF-8 become
// U+FFFD exactly as Python's bytes.decode("utf-8", errors="replace") does.
func (t *Tokenizer) Decode(ids []int) string {
	return lossyUTF8(t.DecodeBytes(ids))
}

// lossyUTF8 replaces each maximal invalid UTF-8 subpart with U+FFFD (the
// WHATWG/Python "replace" rule; x/text's UTF-8 decoder implements it).
func lossyUTF8(b []byte) string {
	s := string(b)
	if utf8.Valid(b) {
		return s
	}
	out, err := xunicode.UTF8.NewDecoder().String(s)
	if err != nil { // the decoder replaces instead of failing; keep the bytes if it ever does
		return s
	}
	return out
}

// VocabSize is the number of ids: one more than the largest id, added tokens included.
func (t *Tokenizer) VocabSize() int { return len(t.idBytes) }

// NumMerges is the number of BPE merges of the model.
func (t *Tokenizer) NumMerges() int { return t.numMerge }

// EOS is the id of tokenizer_config.json's eos_token (<|im_end|> for Qwen2.5 instruct).
func (t *Tokenizer) EOS() int { return t.eos }

// PadID is the id of pad_token, or EOS when the config has none.
func (t *Tokenizer) PadID() int { return t.pad }

// TokenID returns the id of a token given by its text: an added token's
// content, or the exact raw text of one vocabulary entry.
func (t *Tokenizer) TokenID(s string) (int, bool) {
	if id, ok := t.addedIDs[s]; ok {
		return id, true
	}
	id, ok := t.encoder[s]
	return id, ok
}

// TokenBytes returns the raw bytes of one id (an added token's content).
func (t *Tokenizer) TokenBytes(id int) ([]byte, bool) {
	if id < 0 || id >= len(t.idBytes) || t.idBytes[id] == nil {
		return nil, false
	}
	return t.idBytes[id], true
}

// IsSpecial reports whether id is an added token marked special
// (<|im_start|>, <|im_end|>, <|endoftext|>, ...; <tool_call> is added but not special).
func (t *Tokenizer) IsSpecial(id int) bool {
	return id >= 0 && id < len(t.special) && t.special[id]
}

// AddedTokens returns the added tokens in tokenizer.json order.
func (t *Tokenizer) AddedTokens() []AddedToken {
	return append([]AddedToken(nil), t.added...)
}

// Specials holds the ids of the chat-protocol tokens; -1 where the tokenizer lacks one.
type Specials struct {
	EOS, Pad                   int
	ImStart, ImEnd             int
	ToolCallStart, ToolCallEnd int // <tool_call>, </tool_call>
	EndOfText                  int // <|endoftext|>
}

// Specials looks up the chat-protocol tokens.
func (t *Tokenizer) Specials() Specials {
	look := func(s string) int {
		if id, ok := t.addedIDs[s]; ok {
			return id
		}
		return -1
	}
	return Specials{
		EOS: t.eos, Pad: t.pad,
		ImStart: look("<|im_start|>"), ImEnd: look("<|im_end|>"),
		ToolCallStart: look("<tool_call>"), ToolCallEnd: look("</tool_call>"),
		EndOfText: look("<|endoftext|>"),
	}
}

// Dir is the directory the tokenizer was loaded from.
func (t *Tokenizer) Dir() string { return t.dir }

// sortedAdded returns the added tokens ordered by id.
func (t *Tokenizer) sortedAdded() []AddedToken {
	a := t.AddedTokens()
	sort.SliceStable(a, func(i, j int) bool { return a[i].ID < a[j].ID })
	return a
}

// TokenString is TokenBytes as a string ("" for an unknown id).
func (t *Tokenizer) TokenString(id int) string {
	b, _ := t.TokenBytes(id)
	return string(b)
}

// PreTokenization is how a tokenizer cuts text into pieces before BPE merges them: the normalizer and
// pre-tokenizer of tokenizer.json, as this package reads them.
type PreTokenization struct {
	Pattern string // the split regex
	NFC     bool   // the normalizer is NFC
	Digits  bool   // every digit is its own piece first (Digits(individual_digits))
}

// PreTokenization returns how the tokenizer cuts text before BPE.
func (t *Tokenizer) PreTokenization() PreTokenization {
	return PreTokenization{Pattern: t.pattern, NFC: t.nfc, Digits: t.digits}
}

// ParsePreTokenization reads a normalizer and pre-tokenizer of tokenizer.json (each a JSON value; null for none)
// as Load would.
func ParsePreTokenization(normalizer, preTokenizer json.RawMessage) (PreTokenization, error) {
	nfc, err := parseNormalizer(normalizer)
	if err != nil {
		return PreTokenization{}, err
	}
	pattern, digits, err := parsePreTokenizer(preTokenizer)
	if err != nil {
		return PreTokenization{}, err
	}
	return PreTokenization{Pattern: pattern, NFC: nfc, Digits: digits}, nil
}

// Merges returns the BPE merges of tokenizer.json in merge order.
func (t *Tokenizer) Merges() ([][2]string, error) {
	var tj struct {
		Model struct {
			Merges json.RawMessage `json:"merges"`
		} `json:"model"`
	}
	if err := json.Unmarshal(t.rawJSON, &tj); err != nil {
		return nil, err
	}
	return parseMerges(tj.Model.Merges)
}

// ConfigTokens is what tokenizer_config.json says of the special tokens: their contents ("" where it names none
// or names one in a form this package cannot read) and whether encoding adds BOS and EOS.
type ConfigTokens struct {
	BOS, EOS, Unk, Pad string
	AddBOS, AddEOS     bool
}

// ConfigTokens reads the special tokens of tokenizer_config.json.
func (t *Tokenizer) ConfigTokens() (ConfigTokens, error) {
	var cfg struct {
		AddBOS *bool `json:"add_bos_token"`
		AddEOS *bool `json:"add_eos_token"`
	}
	if err := json.Unmarshal(t.rawCfg, &cfg); err != nil {
		return ConfigTokens{}, fmt.Errorf("tokenizer_config.json: %w", err)
	}
	name := func(raw json.RawMessage) string {
		s, err := tokenString(raw)
		if err != nil {
			return ""
		}
		return s
	}
	return ConfigTokens{
		BOS: name(t.config.BOSToken), EOS: name(t.config.EOSToken), Unk: name(t.config.UnkToken), Pad: name(t.config.PadToken),
		AddBOS: cfg.AddBOS != nil && *cfg.AddBOS, AddEOS: cfg.AddEOS != nil && *cfg.AddEOS,
	}, nil
}
