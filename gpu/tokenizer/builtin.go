package tokenizer

import (
	"fmt"
	"strconv"
)

// Special tokens of the built-in tokenizer, in id order after the merges.
const (
	EndOfText = "<|endoftext|>"
	IMStart   = "<|im_start|>"
	IMEnd     = "<|im_end|>"
)

// builtinMerges are the merges of the built-in tokenizer, in rank order,
// as pairs of byte strings. They favour the spaces, newlines and short
// English and Python fragments that dominate code prompts.
var builtinMerges = [...][2]string{
	{" ", " "}, {"  ", "  "}, {"\n", "\n"}, {"e", "r"}, {"i", "n"}, {"o", "n"},
	{"r", "e"}, {"t", "h"}, {" ", "t"}, {"th", "e"}, {" ", "a"}, {" ", "s"},
	{"e", "s"}, {"a", "t"}, {"o", "r"}, {"e", "n"}, {"s", "e"}, {"l", "f"},
	{"se", "lf"}, {"d", "e"}, {"de", "f"}, {" ", "the"}, {"i", "f"}, {"r", "n"},
	{"re", "t"}, {"ret", "u"}, {"retu", "rn"}, {" ", "="}, {"(", ")"}, {"i", "m"},
	{"im", "p"}, {"o", "u"},
}

// BuiltinVocabSize is the number of ids of Builtin: 256 bytes, the merges
// and three special tokens (a constant, so that no tokenizer is built
// while the program starts).
const BuiltinVocabSize = 256 + len(builtinMerges) + 3

// BuiltinConfig is the tokenizer_config.json of the built-in tokenizer:
// ChatML template, <|im_end|> as end of turn, <|endoftext|> as padding.
var BuiltinConfig = Config{ChatTemplate: ChatMLTemplate, EOS: IMEnd, PAD: EndOfText, ModelMaxLength: 4096}

// Builtin returns the tokenizer of the built-in tiny model: byte-level BPE
// created in code (ids 0–255 are the bytes, then one id a merge, then
// <|endoftext|>, <|im_start|> and <|im_end|>), with the Qwen2 pre-tokenizer
// and NFC normalization, so that everything runs without downloads.
func Builtin() *Tokenizer {
	t, err := builtinVocab(0)
	if err != nil {
		panic("tokenizer: built-in vocabulary: " + err.Error()) // a bug in this file
	}
	return t
}

// BuiltinSized returns Builtin with ordinary tokens "<|reserved_N|>"
// after its own, up to size ids, for a model whose vocabulary is larger
// (a random model at a real model's shape): every id the model can sample
// then decodes. No merge produces a reserved token, so text encodes as
// with Builtin.
func BuiltinSized(size int) (*Tokenizer, error) {
	if size < BuiltinVocabSize || size > 1<<24 {
		return nil, fmt.Errorf("tokenizer: vocabulary of %d ids, want %d to %d", size, BuiltinVocabSize, 1<<24)
	}
	return builtinVocab(size)
}

func builtinVocab(size int) (*Tokenizer, error) {
	v := Vocab{Regex: RegexQwen2, NFC: true, Tokens: map[string]int32{}}
	for b := range 256 {
		v.Tokens[string([]byte{byte(b)})] = int32(b)
	}
	next := int32(256)
	for _, m := range builtinMerges {
		joined := m[0] + m[1]
		if _, dup := v.Tokens[joined]; dup {
			continue
		}
		v.Tokens[joined] = next
		next++
		v.Merges = append(v.Merges, [2]int32{v.Tokens[m[0]], v.Tokens[m[1]]})
	}
	for _, s := range []string{EndOfText, IMStart, IMEnd} {
		v.Added = append(v.Added, AddedToken{ID: next, Content: s, Special: true})
		next++
	}
	for i := 0; int(next) < size; i++ {
		v.Tokens["<|reserved_"+strconv.Itoa(i)+"|>"] = next
		next++
	}
	t, err := New(v)
	if err != nil {
		return nil, err
	}
	t.Chat = &ChatTemplate{Format: ChatML}
	return t, nil
}
