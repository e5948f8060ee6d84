package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// jsonFile is the part of a Hugging Face tokenizer.json this package reads.
type jsonFile struct {
	AddedTokens []struct {
		ID         int32  `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Special    bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer   *component `json:"normalizer"`
	PreTokenizer *component `json:"pre_tokenizer"`
	Model        struct {
		Type                    string           `json:"type"`
		Dropout                 *float64         `json:"dropout"`
		UnkToken                *string          `json:"unk_token"`
		ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
		ByteFallback            bool             `json:"byte_fallback"`
		IgnoreMerges            bool             `json:"ignore_merges"`
		Vocab                   map[string]int32 `json:"vocab"`
		Merges                  json.RawMessage  `json:"merges"`
	} `json:"model"`
}

// component is a normalizer or pre-tokenizer node of tokenizer.json.
type component struct {
	Type          string       `json:"type"`
	Normalizers   []*component `json:"normalizers"`
	PreTokenizers []*component `json:"pretokenizers"`
	Pattern       *struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior         string `json:"behavior"`
	Invert           bool   `json:"invert"`
	AddPrefixSpace   bool   `json:"add_prefix_space"`
	UseRegex         *bool  `json:"use_regex"`
	IndividualDigits bool   `json:"individual_digits"`
}

// Parse reads a Hugging Face tokenizer.json holding a byte-level BPE model.
// It fails with a message naming the unsupported part on anything it
// cannot reproduce exactly (another model type, dropout, byte fallback, an
// unknown pre-tokenizer expression or normalizer).
func Parse(data []byte) (*Tokenizer, error) {
	var f jsonFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("tokenizer: parse tokenizer.json: %w", err)
	}
	m := &f.Model
	switch {
	case m.Type != "BPE" && m.Type != "":
		return nil, fmt.Errorf("tokenizer: unsupported model type %q (want BPE)", m.Type)
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, fmt.Errorf("tokenizer: unsupported BPE dropout %v", *m.Dropout)
	case m.ByteFallback:
		return nil, fmt.Errorf("tokenizer: unsupported BPE byte_fallback (SentencePiece-style vocabulary)")
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return nil, fmt.Errorf("tokenizer: unsupported continuing_subword_prefix %q", *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, fmt.Errorf("tokenizer: unsupported end_of_word_suffix %q", *m.EndOfWordSuffix)
	case len(m.Vocab) == 0:
		return nil, fmt.Errorf("tokenizer: tokenizer.json has no model.vocab")
	}
	v := Vocab{IgnoreMerges: m.IgnoreMerges, Tokens: make(map[string]int32, len(m.Vocab))}
	addedID := map[string]int32{}
	for _, a := range f.AddedTokens {
		addedID[a.Content] = a.ID
	}
	for s, id := range m.Vocab {
		if aid, ok := addedID[s]; ok && aid == id {
			continue // an added token, matched before pre-tokenization
		}
		b, ok := byteLevelDecode(s)
		if !ok {
			return nil, fmt.Errorf("tokenizer: vocab entry %q (id %d) is not byte-level text", s, id)
		}
		v.Tokens[string(b)] = id
	}
	pairs, err := parseMerges(m.Merges)
	if err != nil {
		return nil, err
	}
	v.Merges = make([][2]int32, len(pairs))
	for i, p := range pairs {
		for k := range 2 {
			id, ok := m.Vocab[p[k]]
			if !ok {
				return nil, fmt.Errorf("tokenizer: merge %d: %q is not in the vocabulary", i, p[k])
			}
			v.Merges[i][k] = id
		}
	}
	for _, a := range f.AddedTokens {
		if a.SingleWord || a.LStrip || a.RStrip {
			return nil, fmt.Errorf("tokenizer: added token %q: single_word, lstrip and rstrip are not supported", a.Content)
		}
		v.Added = append(v.Added, AddedToken{ID: a.ID, Content: a.Content, Special: a.Special})
	}
	if v.NFC, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if v.Regex, err = parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	return New(v)
}

// parseMerges accepts both forms of model.merges: ["a b", …] and
// [["a", "b"], …].
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err == nil {
		out := make([][2]string, len(strs))
		for i, s := range strs {
			a, b, ok := strings.Cut(s, " ")
			if !ok || a == "" || b == "" || strings.Contains(b, " ") {
				return nil, fmt.Errorf("tokenizer: merge %d %q is not two space-separated tokens", i, s)
			}
			out[i] = [2]string{a, b}
		}
		return out, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("tokenizer: model.merges: %w", err)
	}
	out := make([][2]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, fmt.Errorf("tokenizer: merge %d has %d parts, want 2", i, len(p))
		}
		out[i] = [2]string{p[0], p[1]}
	}
	return out, nil
}

// parseNormalizer reports whether NFC is applied; any other normalization
// is an error.
func parseNormalizer(c *component) (nfc bool, err error) {
	if c == nil {
		return false, nil
	}
	switch c.Type {
	case "NFC":
		return true, nil
	case "Sequence":
		for _, n := range c.Normalizers {
			x, err := parseNormalizer(n)
			if err != nil {
				return false, err
			}
			nfc = nfc || x
		}
		return nfc, nil
	}
	return false, fmt.Errorf("tokenizer: unsupported normalizer %q", c.Type)
}

// parsePreTokenizer returns the split expression of a byte-level
// pre-tokenizer: either ByteLevel with use_regex (GPT-2) or a Sequence of
// Split(regex, Isolated) and ByteLevel without its own regex.
func parsePreTokenizer(c *component) (string, error) {
	if c == nil {
		return "", fmt.Errorf("tokenizer: no pre_tokenizer (want ByteLevel)")
	}
	byteLevel := func(c *component) error {
		if c.AddPrefixSpace {
			return fmt.Errorf("tokenizer: unsupported ByteLevel add_prefix_space=true")
		}
		return nil
	}
	switch c.Type {
	case "ByteLevel":
		if err := byteLevel(c); err != nil {
			return "", err
		}
		if c.UseRegex != nil && !*c.UseRegex {
			return "", fmt.Errorf("tokenizer: ByteLevel pre-tokenizer without a split regex is not supported")
		}
		return RegexGPT2, nil
	case "Sequence":
		if len(c.PreTokenizers) == 2 && c.PreTokenizers[0].Type == "Digits" && c.PreTokenizers[1].Type == "ByteLevel" {
			d, bl := c.PreTokenizers[0], c.PreTokenizers[1]
			if err := byteLevel(bl); err != nil {
				return "", err
			}
			if !d.IndividualDigits || (bl.UseRegex != nil && !*bl.UseRegex) {
				return "", fmt.Errorf("tokenizer: unsupported Digits then ByteLevel pre-tokenizer (want individual_digits=true and use_regex=true)")
			}
			return DigitsGPT2, nil
		}
		if len(c.PreTokenizers) == 2 && c.PreTokenizers[0].Type == "Split" && c.PreTokenizers[1].Type == "ByteLevel" {
			s, bl := c.PreTokenizers[0], c.PreTokenizers[1]
			if err := byteLevel(bl); err != nil {
				return "", err
			}
			if bl.UseRegex == nil || *bl.UseRegex {
				return "", fmt.Errorf("tokenizer: unsupported Split followed by ByteLevel with use_regex=true")
			}
			if s.Pattern == nil || s.Pattern.Regex == nil || s.Behavior != "Isolated" || s.Invert {
				return "", fmt.Errorf("tokenizer: unsupported Split pre-tokenizer (want a Regex pattern, behavior Isolated, invert false)")
			}
			if _, ok := pretokenizerFor(*s.Pattern.Regex); !ok {
				return "", fmt.Errorf("tokenizer: unsupported pre-tokenizer regex %q", *s.Pattern.Regex)
			}
			return *s.Pattern.Regex, nil
		}
		if len(c.PreTokenizers) == 1 {
			return parsePreTokenizer(c.PreTokenizers[0])
		}
		return "", fmt.Errorf("tokenizer: unsupported pre_tokenizer sequence (want Split then ByteLevel)")
	}
	return "", fmt.Errorf("tokenizer: unsupported pre_tokenizer %q", c.Type)
}

// Load reads a tokenizer.json file.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return t, nil
}

// LoadDir reads tokenizer.json from a Hugging Face model directory and,
// when tokenizer_config.json is present, its chat template (t.Chat).
func LoadDir(dir string) (*Tokenizer, error) {
	t, err := Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	data, err := os.ReadFile(cfgPath)
	if os.IsNotExist(err) {
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
		BOS          json.RawMessage `json:"bos_token"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("tokenizer: parse %s: %w", cfgPath, err)
	}
	var tmpl string
	if len(cfg.ChatTemplate) > 0 && string(cfg.ChatTemplate) != "null" {
		if err := json.Unmarshal(cfg.ChatTemplate, &tmpl); err != nil {
			// A list of named templates: use the one called "default".
			var named []struct{ Name, Template string }
			if err2 := json.Unmarshal(cfg.ChatTemplate, &named); err2 != nil {
				return nil, fmt.Errorf("tokenizer: %s: chat_template: %w", cfgPath, err)
			}
			for _, n := range named {
				if n.Name == "default" {
					tmpl = n.Template
				}
			}
		}
	}
	if tmpl != "" {
		c, err := DetectChatTemplate(tmpl)
		if err != nil {
			return nil, fmt.Errorf("%w (in %s)", err, cfgPath)
		}
		t.Chat = c
	}
	return t, nil
}

// LoadGPT2 reads the original GPT-2 vocabulary files: encoder.json (byte
// level text → id) and vocab.bpe (a "#version" line, then one merge a line).
// <|endoftext|> becomes a special added token.
func LoadGPT2(encoderJSON, vocabBPE string) (*Tokenizer, error) {
	data, err := os.ReadFile(encoderJSON)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	var enc map[string]int32
	if err := json.Unmarshal(data, &enc); err != nil {
		return nil, fmt.Errorf("tokenizer: parse %s: %w", encoderJSON, err)
	}
	bpe, err := os.ReadFile(vocabBPE)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	v := Vocab{Regex: RegexGPT2, Tokens: make(map[string]int32, len(enc))}
	for s, id := range enc {
		if s == "<|endoftext|>" {
			v.Added = append(v.Added, AddedToken{ID: id, Content: s, Special: true})
			continue
		}
		b, ok := byteLevelDecode(s)
		if !ok {
			return nil, fmt.Errorf("tokenizer: %s: entry %q is not byte-level text", encoderJSON, s)
		}
		v.Tokens[string(b)] = id
	}
	sc := bufio.NewScanner(bytes.NewReader(bpe))
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimRight(sc.Text(), "\r")
		if l == "" || (line == 1 && strings.HasPrefix(l, "#version")) {
			continue
		}
		a, b, ok := strings.Cut(l, " ")
		ia, oka := enc[a]
		ib, okb := enc[b]
		if !ok || !oka || !okb {
			return nil, fmt.Errorf("tokenizer: %s:%d: bad merge %q", vocabBPE, line, l)
		}
		v.Merges = append(v.Merges, [2]int32{ia, ib})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", vocabBPE, err)
	}
	return New(v)
}
