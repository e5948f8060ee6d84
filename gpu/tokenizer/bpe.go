package tokenizer

import (
	"fmt"
	"sort"
	"sync"

	"golang.org/x/text/unicode/norm"
)

// AddedToken is a token matched literally in the input before
// pre-tokenization (tokenizer.json "added_tokens"). Special tokens are the
// control tokens of the chat template (<|im_start|>, <|eot_id|>, …).
type AddedToken struct {
	ID      int32
	Content string
	Special bool
}

// normalizer is the Unicode normalization applied to text between added
// tokens.
type normalizer int

const (
	normNone normalizer = iota
	normNFC
	normNFKC
)

type merge struct {
	rank int32
	id   int32 // id of the merged token
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// maxCache bounds the number of pre-tokens whose ids are cached.
const maxCache = 1 << 16

// Tokenizer is a byte-level BPE tokenizer (GPT-2, Qwen2/3, Llama 3 styles).
// It is safe for concurrent use; its vocabulary is immutable after
// construction and the pre-token cache is guarded by a mutex.
type Tokenizer struct {
	pre          pretokenizer
	norm         normalizer
	ignoreMerges bool

	tokens  [][]byte         // id → raw bytes; nil where the id has no token
	ids     map[string]int32 // raw bytes → id, model vocabulary only
	byteIDs [256]int32
	merges  map[uint64]merge
	pairs   [][2]int32 // merges in rank order, for writing tokenizer.json

	added   []AddedToken // by id
	byFirst [256][]int   // first byte → indices into added, longest first
	special map[int32]bool

	// Chat is the chat template detected from tokenizer_config.json, or nil.
	Chat *ChatTemplate

	mu    sync.Mutex
	cache map[string][]int32
}

// Vocab describes a byte-level BPE vocabulary for New. Tokens are raw
// bytes (not the byte-level text form); Merges are pairs of ids in rank
// order, each of which must concatenate to a token of the vocabulary.
type Vocab struct {
	Tokens map[string]int32
	Merges [][2]int32
	Added  []AddedToken
	// Regex is the pre-tokenizer expression: RegexGPT2, RegexQwen2 or
	// RegexLlama3.
	Regex string
	// NFC applies Unicode NFC normalization before pre-tokenization.
	NFC bool
	// IgnoreMerges emits a pre-token that is itself in the vocabulary
	// without running BPE (Llama 3).
	IgnoreMerges bool
}

// New builds a Tokenizer from v. It fails when a byte has no token, when a
// merge does not produce a token of the vocabulary, when ids collide, or
// when the pre-tokenizer expression is not supported.
func New(v Vocab) (*Tokenizer, error) {
	pre, ok := pretokenizerFor(v.Regex)
	if !ok {
		return nil, fmt.Errorf("tokenizer: unsupported pre-tokenizer regex %q", v.Regex)
	}
	t := &Tokenizer{
		pre:          pre,
		ignoreMerges: v.IgnoreMerges,
		ids:          make(map[string]int32, len(v.Tokens)),
		merges:       make(map[uint64]merge, len(v.Merges)),
		special:      map[int32]bool{},
		cache:        map[string][]int32{},
	}
	if v.NFC {
		t.norm = normNFC
	}
	size := int32(0)
	for s, id := range v.Tokens {
		if id < 0 {
			return nil, fmt.Errorf("tokenizer: token %q has negative id %d", s, id)
		}
		size = max(size, id+1)
	}
	for _, a := range v.Added {
		if a.ID < 0 || a.Content == "" {
			return nil, fmt.Errorf("tokenizer: invalid added token %d %q", a.ID, a.Content)
		}
		size = max(size, a.ID+1)
	}
	t.tokens = make([][]byte, size)
	for s, id := range v.Tokens {
		if t.tokens[id] != nil {
			return nil, fmt.Errorf("tokenizer: id %d used by both %q and %q", id, t.tokens[id], s)
		}
		t.tokens[id] = []byte(s)
		t.ids[s] = id
	}
	// A byte without a token of its own is dropped from the input, as the
	// tokenizers library's BPE drops a symbol missing from its vocabulary
	// when there is no unk_token (SmolLM2's vocabulary lacks 21 bytes that
	// valid UTF-8 text rarely or never holds).
	missing := 0
	for b := range 256 {
		id, ok := t.ids[string([]byte{byte(b)})]
		if !ok {
			id = -1
			missing++
		}
		t.byteIDs[b] = id
	}
	if missing > 128 {
		return nil, fmt.Errorf("tokenizer: %d of the 256 bytes have no token (not a byte-level vocabulary)", missing)
	}
	for rank, p := range v.Merges {
		if p[0] < 0 || p[1] < 0 || int(p[0]) >= len(t.tokens) || int(p[1]) >= len(t.tokens) ||
			t.tokens[p[0]] == nil || t.tokens[p[1]] == nil {
			return nil, fmt.Errorf("tokenizer: merge %d refers to unknown id (%d, %d)", rank, p[0], p[1])
		}
		joined := string(t.tokens[p[0]]) + string(t.tokens[p[1]])
		id, ok := t.ids[joined]
		if !ok {
			return nil, fmt.Errorf("tokenizer: merge %d (%q + %q) is not in the vocabulary", rank, t.tokens[p[0]], t.tokens[p[1]])
		}
		k := pairKey(p[0], p[1])
		if _, dup := t.merges[k]; !dup { // the first (lowest) rank wins
			t.merges[k] = merge{rank: int32(rank), id: id}
		}
	}
	t.pairs = append([][2]int32(nil), v.Merges...)
	t.added = append([]AddedToken(nil), v.Added...)
	sort.Slice(t.added, func(i, j int) bool { return t.added[i].ID < t.added[j].ID })
	for i, a := range t.added {
		if t.tokens[a.ID] != nil && string(t.tokens[a.ID]) != a.Content {
			return nil, fmt.Errorf("tokenizer: added token %q reuses id %d of %q", a.Content, a.ID, t.tokens[a.ID])
		}
		t.tokens[a.ID] = []byte(a.Content)
		if a.Special {
			t.special[a.ID] = true
		}
		t.byFirst[a.Content[0]] = append(t.byFirst[a.Content[0]], i)
	}
	for b := range t.byFirst {
		l := t.byFirst[b]
		sort.SliceStable(l, func(i, j int) bool { return len(t.added[l[i]].Content) > len(t.added[l[j]].Content) })
	}
	return t, nil
}

// VocabSize returns one more than the largest token id.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// Added returns the added tokens ordered by id. The slice must not be
// modified.
func (t *Tokenizer) Added() []AddedToken { return t.added }

// NumMerges returns the number of BPE merges.
func (t *Tokenizer) NumMerges() int { return len(t.pairs) }

// Regex returns the pre-tokenizer expression.
func (t *Tokenizer) Regex() string { return t.pre.regex() }

// TokenID returns the id of the token whose text is s (an added token or a
// vocabulary entry given as raw bytes).
func (t *Tokenizer) TokenID(s string) (int32, bool) {
	for _, a := range t.added {
		if a.Content == s {
			return a.ID, true
		}
	}
	id, ok := t.ids[s]
	return id, ok
}

// IsSpecial reports whether id is a special added token.
func (t *Tokenizer) IsSpecial(id int32) bool { return t.special[id] }

// Encode returns the token ids of text. Added tokens (including special
// ones such as <|im_end|>) that occur literally in text are recognised, as
// Hugging Face tokenizers do by default; use EncodeOrdinary for text that
// must never produce control tokens.
func (t *Tokenizer) Encode(text string) []int32 { return t.AppendEncode(nil, text) }

// AppendEncode appends the ids of text to dst and returns the extended
// slice. With a warm cache and enough capacity in dst it does not allocate.
func (t *Tokenizer) AppendEncode(dst []int32, text string) []int32 {
	seg := 0
	for i := 0; i < len(text); {
		if a := t.addedAt(text, i); a >= 0 {
			dst = t.appendOrdinary(dst, text[seg:i])
			dst = append(dst, t.added[a].ID)
			i += len(t.added[a].Content)
			seg = i
			continue
		}
		i++
	}
	return t.appendOrdinary(dst, text[seg:])
}

// EncodeOrdinary returns the ids of text with added tokens treated as plain
// text.
func (t *Tokenizer) EncodeOrdinary(text string) []int32 { return t.appendOrdinary(nil, text) }

func (t *Tokenizer) addedAt(text string, i int) int {
	for _, a := range t.byFirst[text[i]] {
		c := t.added[a].Content
		if len(text)-i >= len(c) && text[i:i+len(c)] == c {
			return a
		}
	}
	return -1
}

func (t *Tokenizer) appendOrdinary(dst []int32, s string) []int32 {
	if s == "" {
		return dst
	}
	switch {
	case t.norm == normNone || isASCII(s):
		// ASCII text is in every normal form; checking it with the norm
		// package would allocate.
	case t.norm == normNFC:
		if !norm.NFC.IsNormalString(s) {
			s = norm.NFC.String(s)
		}
	case t.norm == normNFKC:
		if !norm.NFKC.IsNormalString(s) {
			s = norm.NFKC.String(s)
		}
	}
	for i := 0; i < len(s); {
		j := t.pre.next(s, i)
		dst = t.appendPiece(dst, s[i:j])
		i = j
	}
	return dst
}

func (t *Tokenizer) appendPiece(dst []int32, piece string) []int32 {
	if len(piece) == 1 {
		if id := t.byteIDs[piece[0]]; id >= 0 {
			dst = append(dst, id)
		}
		return dst
	}
	if t.ignoreMerges {
		if id, ok := t.ids[piece]; ok {
			return append(dst, id)
		}
	}
	t.mu.Lock()
	ids, ok := t.cache[piece]
	t.mu.Unlock()
	if ok {
		return append(dst, ids...)
	}
	ids = t.bpe(piece)
	t.mu.Lock()
	if len(t.cache) >= maxCache {
		clear(t.cache)
	}
	t.cache[piece] = ids
	t.mu.Unlock()
	return append(dst, ids...)
}

// bpe merges the bytes of piece by rank: at each step the pair of adjacent
// symbols with the lowest merge rank is merged, the leftmost one first.
func (t *Tokenizer) bpe(piece string) []int32 {
	syms := make([]int32, 0, len(piece))
	for i := 0; i < len(piece); i++ {
		if id := t.byteIDs[piece[i]]; id >= 0 {
			syms = append(syms, id)
		}
	}
	for len(syms) > 1 {
		best, at := merge{rank: -1}, -1
		for i := 0; i+1 < len(syms); i++ {
			m, ok := t.merges[pairKey(syms[i], syms[i+1])]
			if ok && (at < 0 || m.rank < best.rank) {
				best, at = m, i
			}
		}
		if at < 0 {
			break
		}
		syms[at] = best.id
		syms = append(syms[:at+1], syms[at+2:]...)
	}
	return syms
}

// DecodeBytes appends the bytes of ids to dst. Special tokens are included
// when withSpecial is set. It fails on an id that has no token.
func (t *Tokenizer) DecodeBytes(dst []byte, ids []int32, withSpecial bool) ([]byte, error) {
	for i, id := range ids {
		if id < 0 || int(id) >= len(t.tokens) || t.tokens[id] == nil {
			return dst, fmt.Errorf("tokenizer: decode: id %d at position %d has no token", id, i)
		}
		if !withSpecial && t.special[id] {
			continue
		}
		dst = append(dst, t.tokens[id]...)
	}
	return dst, nil
}

// Decode returns the text of ids, special tokens included. The result holds
// the exact bytes of the tokens, so it may be invalid UTF-8 when ids end
// inside a multi-byte character; strings.ToValidUTF8 makes it printable.
func (t *Tokenizer) Decode(ids []int32) (string, error) {
	b, err := t.DecodeBytes(nil, ids, true)
	return string(b), err
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
