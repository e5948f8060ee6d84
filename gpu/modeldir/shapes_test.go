package modeldir

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"swerl/gpu"
	"swerl/gpu/hf"
	"swerl/gpu/tokenizer"
)

// The Qwen2.5 built-ins have the hub models' shapes: the parameter counts
// their safetensors hold (494,032,768; 1,543,714,304; 7,615,616,512) and
// their vocabularies, with a tokenizer that decodes every id.
func TestQwenShapes(t *testing.T) {
	for name, want := range map[string]struct {
		params int64
		vocab  int
		tied   bool
	}{
		"qwen2.5-0.5b": {494_032_768, 151936, true},
		"qwen2.5-1.5b": {1_543_714_304, 151936, true},
		"qwen2.5-7b":   {7_615_616_512, 152064, false},
	} {
		c, err := BuiltinConfig(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.NumParams(); got != want.params || c.VocabSize != want.vocab || c.TieWordEmbeddings != want.tied {
			t.Errorf("%s: %d parameters, vocabulary %d, tied %v; want %d, %d, %v", name, got, c.VocabSize, c.TieWordEmbeddings, want.params, want.vocab, want.tied)
		}
		tok, err := tokenizer.BuiltinSized(c.VocabSize)
		if err != nil {
			t.Fatal(err)
		}
		if tok.VocabSize() != c.VocabSize {
			t.Errorf("%s: tokenizer of %d ids for a vocabulary of %d", name, tok.VocabSize(), c.VocabSize)
		}
		if s, err := tok.Decode([]int32{int32(c.VocabSize - 1)}); err != nil || s == "" {
			t.Errorf("%s: the last id decodes to %q, %v", name, s, err)
		}
		if eos, _ := tok.TokenID(tokenizer.IMEnd); c.EosTokenID != int(eos) {
			t.Errorf("%s: eos_token_id %v, the tokenizer's <|im_end|> is %d", name, c.EosTokenID, eos)
		}
	}
}

// A sized tokenizer writes and loads back, encodes text as the built-in
// one does, and bf16 shards of a model load back as the model rounded.
func TestSizedTokenizerAndShards(t *testing.T) {
	dir := t.TempDir()
	tok, err := tokenizer.BuiltinSized(4000)
	if err != nil {
		t.Fatal(err)
	}
	cfg := gpu.TinyConfig()
	cfg.VocabSize = 4000
	eos, _ := tok.TokenID(tokenizer.IMEnd)
	cfg.EosTokenID = int(eos)
	m, err := gpu.NewModel(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	files, err := save(dir, m, tok, tokenizer.BuiltinConfig, hf.SaveOptions{DType: hf.BF16, MaxShardBytes: 200_000})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Errorf("files %v: want several shards and an index", files)
	}
	p, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p.Tokenizer.VocabSize() != 4000 || p.Model.Config.VocabSize != 4000 {
		t.Fatalf("loaded a tokenizer of %d ids and a vocabulary of %d", p.Tokenizer.VocabSize(), p.Model.Config.VocabSize)
	}
	text := "def f(self):\n    return self.x  # <|reserved_3|> stays text\n"
	if got, want := p.Tokenizer.Encode(text), tokenizer.Builtin().Encode(text); len(got) != len(want) {
		t.Errorf("sized tokenizer: %d tokens, built-in %d", len(got), len(want))
	}
	for i, ten := range p.Model.Tensors() {
		src := m.Tensors()[i]
		for j, x := range ten.Data {
			if w := hf.BF16ToFloat32(hf.Float32ToBF16(src.Data[j])); x != w {
				t.Fatalf("%s[%d] = %v, want %v (bf16 of %v)", ten.Name, j, x, w, src.Data[j])
			}
		}
	}
	var conf map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &conf); err != nil || conf["torch_dtype"] != "bfloat16" {
		t.Errorf("config.json torch_dtype %v (%v)", conf["torch_dtype"], err)
	}
}
