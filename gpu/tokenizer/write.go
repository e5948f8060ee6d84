package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"

	"swerl/internal/atomicfile"
)

// MarshalJSON returns the Hugging Face tokenizer.json form of t: a BPE
// model with the byte-level vocabulary, merges as "a b" strings (readable
// by every version of the tokenizers library), added tokens, the
// normalizer, and a pre-tokenizer / decoder pair equivalent to t's.
func (t *Tokenizer) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	str := func(s string) {
		q, _ := json.Marshal(s)
		b.Write(q)
	}
	b.WriteString("{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [")
	for i, a := range t.added {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "\n    {\"id\": %d, \"content\": ", a.ID)
		str(a.Content)
		fmt.Fprintf(&b, ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": %t}", a.Special)
	}
	b.WriteString("\n  ],\n  \"normalizer\": ")
	switch t.norm {
	case normNFC:
		b.WriteString(`{"type": "NFC"}`)
	case normNFKC:
		b.WriteString(`{"type": "NFKC"}`)
	default:
		b.WriteString("null")
	}
	const byteLevel = `{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}`
	b.WriteString(",\n  \"pre_tokenizer\": ")
	switch t.pre {
	case preGPT2:
		b.WriteString(`{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}`)
	case preDigitsGPT2:
		b.WriteString(`{"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]}`)
	default:
		b.WriteString(`{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": `)
		str(t.pre.regex())
		b.WriteString(`}, "behavior": "Isolated", "invert": false}, ` + byteLevel + `]}`)
	}
	b.WriteString(",\n  \"post_processor\": " + byteLevel + ",\n  \"decoder\": " + byteLevel)
	fmt.Fprintf(&b, ",\n  \"model\": {\n    \"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, \"continuing_subword_prefix\": \"\", \"end_of_word_suffix\": \"\", \"fuse_unk\": false, \"byte_fallback\": false, \"ignore_merges\": %t,\n    \"vocab\": {", t.ignoreMerges)
	first := true
	for id, tok := range t.tokens {
		// Added tokens are in the vocabulary too: the tokenizers library
		// gives an added token the id the model's vocabulary has for it,
		// and a new id past the vocabulary when it has none, so SmolLM2's
		// control tokens (ids 0 to 16) must be there to keep their ids.
		if tok == nil {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString("\n      ")
		if t.isAdded(int32(id)) {
			str(string(tok))
		} else {
			str(byteLevelEncode(tok))
		}
		b.WriteString(": " + strconv.Itoa(id))
	}
	b.WriteString("\n    },\n    \"merges\": [")
	for i, p := range t.pairs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n      ")
		str(byteLevelEncode(t.tokens[p[0]]) + " " + byteLevelEncode(t.tokens[p[1]]))
	}
	b.WriteString("\n    ]\n  }\n}\n")
	return b.Bytes(), nil
}

func (t *Tokenizer) isAdded(id int32) bool {
	for _, a := range t.added {
		if a.ID == id {
			return true
		}
	}
	return false
}

// Config holds the tokenizer_config.json fields that swerl writes. Token
// fields name added tokens by content; "" writes null.
type Config struct {
	ChatTemplate string // Jinja source
	BOS, EOS     string
	PAD          string
	// ModelMaxLength is the longest sequence in tokens.
	ModelMaxLength int
}

// WriteDir writes tokenizer.json and tokenizer_config.json into dir, each
// atomically. Every token named in cfg must be an added token of t.
func (t *Tokenizer) WriteDir(dir string, cfg Config) error {
	tj, err := t.MarshalJSON()
	if err != nil {
		return err
	}
	tokOrNull := func(field, s string) (any, error) {
		if s == "" {
			return nil, nil
		}
		if _, ok := t.TokenID(s); !ok {
			return nil, fmt.Errorf("tokenizer: config %s: %q is not a token", field, s)
		}
		return s, nil
	}
	decoder := map[string]any{}
	for _, a := range t.added {
		decoder[strconv.Itoa(int(a.ID))] = map[string]any{
			"content": a.Content, "lstrip": false, "normalized": false,
			"rstrip": false, "single_word": false, "special": a.Special,
		}
	}
	c := map[string]any{
		"add_bos_token":                cfg.BOS != "",
		"add_prefix_space":             false,
		"added_tokens_decoder":         decoder,
		"clean_up_tokenization_spaces": false,
		"errors":                       "replace",
		"model_max_length":             cfg.ModelMaxLength,
		"split_special_tokens":         false,
		"tokenizer_class":              "PreTrainedTokenizerFast",
		"unk_token":                    nil,
	}
	if cfg.ChatTemplate != "" {
		if _, err := DetectChatTemplate(cfg.ChatTemplate); err != nil {
			return err
		}
		c["chat_template"] = cfg.ChatTemplate
	}
	for field, s := range map[string]string{"bos_token": cfg.BOS, "eos_token": cfg.EOS, "pad_token": cfg.PAD} {
		if c[field], err = tokOrNull(field, s); err != nil {
			return err
		}
	}
	cj, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "tokenizer.json"), tj); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, "tokenizer_config.json"), append(cj, '\n'))
}
