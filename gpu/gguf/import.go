package gguf

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"swerl/gpu/arch"
	"swerl/gpu/hf"
	"swerl/gpu/tokenizer"
	"swerl/internal/atomicfile"
)

// Architectures lists the general.architecture values Import converts.
var Architectures = []string{"llama", "qwen2"}

// Config reads the architecture from the llama.* or qwen2.* metadata as
// a Hugging Face config.json would hold it. A missing required key, an
// unsupported architecture or rope scaling is an error naming the key.
func (g *File) Config() (arch.Config, error) {
	var c arch.Config
	a, err := g.String("general.architecture")
	if err != nil {
		return c, err
	}
	if a != "llama" && a != "qwen2" {
		return c, fmt.Errorf("gguf: %s: general.architecture %q is not supported (want %s)", g.Path, a, strings.Join(Architectures, " or "))
	}
	c.ModelType = a
	ints := []struct {
		key      string
		dst      *int
		required bool
	}{
		{"embedding_length", &c.HiddenSize, true},
		{"feed_forward_length", &c.IntermediateSize, true},
		{"block_count", &c.NumHiddenLayers, true},
		{"attention.head_count", &c.NumAttentionHeads, true},
		{"attention.head_count_kv", &c.NumKeyValueHeads, false},
		{"attention.key_length", &c.HeadDim, false},
		{"context_length", &c.MaxPositionEmbeddings, true},
		{"vocab_size", &c.VocabSize, false},
	}
	for _, f := range ints {
		key := a + "." + f.key
		if _, ok := g.Lookup(key); !ok {
			if f.required {
				return c, fmt.Errorf("gguf: %s: no metadata key %s", g.Path, key)
			}
			continue
		}
		u, err := g.Uint(key)
		if err != nil {
			return c, err
		}
		if u > math.MaxInt32 {
			return c, fmt.Errorf("gguf: %s: metadata %s is %d, out of range", g.Path, key, u)
		}
		*f.dst = int(u)
	}
	if c.VocabSize == 0 {
		kv, ok := g.Lookup("tokenizer.ggml.tokens")
		arr, isArr := kv.Value.(Array)
		if !ok || !isArr {
			return c, fmt.Errorf("gguf: %s: neither %s.vocab_size nor tokenizer.ggml.tokens gives the vocabulary size", g.Path, a)
		}
		c.VocabSize = arr.Len()
	}
	if c.HeadDim != 0 && c.NumAttentionHeads != 0 && c.HeadDim == c.HiddenSize/c.NumAttentionHeads {
		c.HeadDim = 0 // the default: config.json leaves it out
	}
	if c.RMSNormEps, err = g.Float(a + ".attention.layer_norm_rms_epsilon"); err != nil {
		return c, err
	}
	c.RopeTheta = 10000
	if _, ok := g.Lookup(a + ".rope.freq_base"); ok {
		if c.RopeTheta, err = g.Float(a + ".rope.freq_base"); err != nil {
			return c, err
		}
	}
	if kv, ok := g.Lookup(a + ".rope.scaling.type"); ok && kv.Value != "none" && kv.Value != "" {
		return c, fmt.Errorf("gguf: %s: metadata %s.rope.scaling.type %v is not supported", g.Path, a, kv.Value)
	}
	if _, ok := g.Tensor("rope_freqs.weight"); ok {
		return c, fmt.Errorf("gguf: %s: tensor rope_freqs.weight (Llama 3.1 rope scaling) is not supported", g.Path)
	}
	if dim, err := g.Uint(a + ".rope.dimension_count"); err == nil && c.NumAttentionHeads > 0 && int(dim) != c.HeadSize() {
		return c, fmt.Errorf("gguf: %s: metadata %s.rope.dimension_count %d is not the head size %d (partial rotary embeddings are not supported)", g.Path, a, dim, c.HeadSize())
	}
	_, hasOutput := g.Tensor("output.weight")
	c.TieWordEmbeddings = !hasOutput
	_, c.AttentionBias = g.Tensor("blk.0.attn_q.bias")
	if id, err := g.Uint("tokenizer.ggml.bos_token_id"); err == nil {
		c.BosTokenID = int(id)
	}
	if id, err := g.Uint("tokenizer.ggml.eos_token_id"); err == nil {
		c.EosTokenID = int(id)
	}
	if err := c.ValidateShape(); err != nil {
		return c, fmt.Errorf("gguf: %s: %w", g.Path, err)
	}
	return c, nil
}

// hfNames maps a GGUF tensor name of one layer (after "blk.N.") to its
// Hugging Face name (after "model.layers.N.").
var hfNames = map[string]string{
	"attn_norm.weight":   "input_layernorm.weight",
	"attn_q.weight":      "self_attn.q_proj.weight",
	"attn_q.bias":        "self_attn.q_proj.bias",
	"attn_k.weight":      "self_attn.k_proj.weight",
	"attn_k.bias":        "self_attn.k_proj.bias",
	"attn_v.weight":      "self_attn.v_proj.weight",
	"attn_v.bias":        "self_attn.v_proj.bias",
	"attn_output.weight": "self_attn.o_proj.weight",
	"ffn_norm.weight":    "post_attention_layernorm.weight",
	"ffn_gate.weight":    "mlp.gate_proj.weight",
	"ffn_up.weight":      "mlp.up_proj.weight",
	"ffn_down.weight":    "mlp.down_proj.weight",
}

// HFName returns the Hugging Face name of a GGUF tensor name.
func HFName(name string) (string, bool) {
	switch name {
	case "token_embd.weight":
		return "model.embed_tokens.weight", true
	case "output_norm.weight":
		return "model.norm.weight", true
	case "output.weight":
		return "lm_head.weight", true
	}
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return "", false
	}
	layer, tail, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	for _, c := range layer {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	h, ok := hfNames[tail]
	if !ok {
		return "", false
	}
	return "model.layers." + layer + "." + h, true
}

// Tensors dequantizes every tensor of the model described by c (see
// Config) into Hugging Face names, shapes and layouts, in arch's order.
// A tensor of the file that the architecture has no place for, or one it
// lacks, is an error naming it.
func (g *File) HFTensors(c arch.Config) ([]arch.Tensor, error) {
	byHF := map[string]TensorInfo{}
	for _, t := range g.Tensors {
		h, ok := HFName(t.Name)
		if !ok {
			return nil, fmt.Errorf("gguf: %s: tensor %s has no Hugging Face counterpart in a %s model", g.Path, t.Name, c.ModelType)
		}
		byHF[h] = t
	}
	specs := c.Tensors()
	got := make([]arch.TensorSpec, 0, len(byHF))
	for h, t := range byHF {
		got = append(got, arch.TensorSpec{Name: h, Shape: t.Shape()})
	}
	if err := hf.CheckTensors(specs, got); err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", g.Path, err)
	}
	out := make([]arch.Tensor, 0, len(specs))
	for _, s := range specs {
		t := byHF[s.Name]
		data, err := g.Float32(t, nil)
		if err != nil {
			return nil, err
		}
		// llama.cpp's converter permutes the rows of Llama's q and k
		// projections so that rotary pairs are adjacent; Qwen2's are
		// written as they are.
		if c.ModelType == "llama" {
			switch {
			case strings.HasSuffix(s.Name, "q_proj.weight"), strings.HasSuffix(s.Name, "q_proj.bias"):
				data = unpermute(data, c.NumAttentionHeads, s.Shape)
			case strings.HasSuffix(s.Name, "k_proj.weight"), strings.HasSuffix(s.Name, "k_proj.bias"):
				data = unpermute(data, c.KVHeads(), s.Shape)
			}
		}
		out = append(out, arch.Tensor{Name: s.Name, Shape: s.Shape, Data: data})
	}
	return out, nil
}

// unpermute undoes llama.cpp's permute of a [heads*hs, cols] projection:
// the file's row h*hs + 2b + a is the model's row h*hs + a*hs/2 + b.
func unpermute(src []float32, heads int, shape []int) []float32 {
	rows := shape[0]
	cols := 1
	if len(shape) > 1 {
		cols = shape[1]
	}
	hs := rows / heads
	dst := make([]float32, len(src))
	for h := range heads {
		for b := range hs / 2 {
			for a := range 2 {
				from := (h*hs + 2*b + a) * cols
				to := (h*hs + a*hs/2 + b) * cols
				copy(dst[to:to+cols], src[from:from+cols])
			}
		}
	}
	return dst
}

// ggml token types (llama.cpp's llama_token_type).
const (
	tokenNormal      = 1
	tokenUnknown     = 2
	tokenControl     = 3
	tokenUserDefined = 4
	tokenUnused      = 5
	tokenByte        = 6
)

// preTokenizers maps tokenizer.ggml.pre to swerl's pre-tokenizers.
var preTokenizers = map[string]string{
	"gpt-2":     tokenizer.RegexGPT2,
	"smollm":    tokenizer.DigitsGPT2,
	"starcoder": tokenizer.DigitsGPT2,
	"qwen2":     tokenizer.RegexQwen2,
	"llama-bpe": tokenizer.RegexLlama3,
	"llama3":    tokenizer.RegexLlama3,
}

// Tokenizer builds the tokenizer from the tokenizer.ggml.* keys: a
// byte-level BPE ("gpt2") vocabulary, its merges, its control and
// user-defined tokens as added tokens (control ones special), and the
// pre-tokenizer named by tokenizer.ggml.pre. It also returns the
// tokenizer_config.json fields (chat template, bos, eos, pad).
func (g *File) Tokenizer(maxLen int) (*tokenizer.Tokenizer, tokenizer.Config, error) {
	var cfg tokenizer.Config
	model, err := g.String("tokenizer.ggml.model")
	if err != nil {
		return nil, cfg, err
	}
	if model != "gpt2" {
		return nil, cfg, fmt.Errorf("gguf: %s: tokenizer.ggml.model %q is not supported (want gpt2, a byte-level BPE)", g.Path, model)
	}
	pre := "gpt-2"
	if _, ok := g.Lookup("tokenizer.ggml.pre"); ok {
		if pre, err = g.String("tokenizer.ggml.pre"); err != nil {
			return nil, cfg, err
		}
	}
	regex, ok := preTokenizers[pre]
	if !ok {
		return nil, cfg, fmt.Errorf("gguf: %s: tokenizer.ggml.pre %q is not supported (want gpt-2, smollm, starcoder, qwen2 or llama-bpe)", g.Path, pre)
	}
	tokens, err := g.strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, cfg, err
	}
	merges, err := g.strings("tokenizer.ggml.merges")
	if err != nil {
		return nil, cfg, err
	}
	types := make([]int32, len(tokens))
	if kv, ok := g.Lookup("tokenizer.ggml.token_type"); ok {
		arr, _ := kv.Value.(Array)
		tt, ok := arr.Values.([]int32)
		if !ok || len(tt) != len(tokens) {
			return nil, cfg, fmt.Errorf("gguf: %s: tokenizer.ggml.token_type is not %d int32 values", g.Path, len(tokens))
		}
		types = tt
	}
	v := tokenizer.Vocab{Tokens: make(map[string]int32, len(tokens)), Regex: regex}
	ids := make(map[string]int32, len(tokens))
	for i, s := range tokens {
		ids[s] = int32(i)
		switch types[i] {
		case tokenControl, tokenUserDefined:
			v.Added = append(v.Added, tokenizer.AddedToken{ID: int32(i), Content: s, Special: types[i] == tokenControl})
			continue
		case tokenUnused:
			continue
		}
		b, ok := tokenizer.ByteLevelDecode(s)
		if !ok {
			return nil, cfg, fmt.Errorf("gguf: %s: tokenizer.ggml.tokens[%d] %q is not byte-level text", g.Path, i, s)
		}
		if _, dup := v.Tokens[string(b)]; dup {
			return nil, cfg, fmt.Errorf("gguf: %s: tokenizer.ggml.tokens[%d] %q appears twice", g.Path, i, s)
		}
		v.Tokens[string(b)] = int32(i)
	}
	v.Merges = make([][2]int32, len(merges))
	for i, m := range merges {
		a, b, ok := strings.Cut(m, " ")
		ia, oka := ids[a]
		ib, okb := ids[b]
		if !ok || !oka || !okb {
			return nil, cfg, fmt.Errorf("gguf: %s: tokenizer.ggml.merges[%d] %q is not two tokens of the vocabulary", g.Path, i, m)
		}
		v.Merges[i] = [2]int32{ia, ib}
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		return nil, cfg, fmt.Errorf("gguf: %s: %w", g.Path, err)
	}
	cfg.ModelMaxLength = maxLen
	if _, ok := g.Lookup("tokenizer.chat_template"); ok {
		if cfg.ChatTemplate, err = g.String("tokenizer.chat_template"); err != nil {
			return nil, cfg, err
		}
	}
	name := func(key string) (string, error) {
		if _, ok := g.Lookup(key); !ok {
			return "", nil
		}
		id, err := g.Uint(key)
		if err != nil {
			return "", err
		}
		if id >= uint64(len(tokens)) {
			return "", fmt.Errorf("gguf: %s: %s %d is not a token id", g.Path, key, id)
		}
		if types[id] != tokenControl && types[id] != tokenUserDefined {
			return "", nil // tokenizer_config.json names added tokens only
		}
		return tokens[id], nil
	}
	addBOS := false
	if kv, ok := g.Lookup("tokenizer.ggml.add_bos_token"); ok {
		addBOS, _ = kv.Value.(bool)
	}
	if addBOS {
		if cfg.BOS, err = name("tokenizer.ggml.bos_token_id"); err != nil {
			return nil, cfg, err
		}
	}
	if cfg.EOS, err = name("tokenizer.ggml.eos_token_id"); err != nil {
		return nil, cfg, err
	}
	if cfg.PAD, err = name("tokenizer.ggml.padding_token_id"); err != nil {
		return nil, cfg, err
	}
	return tok, cfg, nil
}

func (g *File) strings(key string) ([]string, error) {
	kv, ok := g.Lookup(key)
	if !ok {
		return nil, fmt.Errorf("gguf: %s: no metadata key %s", g.Path, key)
	}
	arr, _ := kv.Value.(Array)
	s, ok := arr.Values.([]string)
	if !ok {
		return nil, fmt.Errorf("gguf: %s: metadata %s is not an array of strings", g.Path, key)
	}
	return s, nil
}

// ImportSummary describes an imported model.
type ImportSummary struct {
	Config arch.Config
	Params int64
	Types  map[string]int // tensor type → count
	Files  []string
}

// Import converts the GGUF file at path into a Hugging Face model
// directory at out (created; it must not hold a model already): config.json,
// the weights in dtype dt, tokenizer.json, tokenizer_config.json and
// generation_config.json. Everything is checked and dequantized before the
// first file is written, and every file is written atomically.
func Import(path, out string, dt hf.DType) (*ImportSummary, error) {
	if _, err := os.Stat(filepath.Join(out, hf.ConfigFile)); err == nil {
		return nil, fmt.Errorf("gguf: %s already holds a model (config.json)", out)
	}
	g, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	c, err := g.Config()
	if err != nil {
		return nil, err
	}
	tok, tcfg, err := g.Tokenizer(c.MaxPositionEmbeddings)
	if err != nil {
		return nil, err
	}
	if tok.VocabSize() > c.VocabSize {
		return nil, fmt.Errorf("gguf: %s: the tokenizer has %d ids, more than the vocabulary size %d", path, tok.VocabSize(), c.VocabSize)
	}
	tensors, err := g.HFTensors(c)
	if err != nil {
		return nil, err
	}
	sum := &ImportSummary{Config: c, Types: map[string]int{}}
	for _, t := range g.Tensors {
		sum.Types[t.Type.String()]++
	}
	for _, t := range tensors {
		sum.Params += int64(len(t.Data))
		for _, x := range t.Data {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fmt.Errorf("gguf: %s: tensor %s holds a NaN or infinite value", path, t.Name)
			}
		}
	}
	files, err := hf.Save(out, c, tensors, hf.SaveOptions{DType: dt})
	if err != nil {
		return nil, err
	}
	if err := tok.WriteDir(out, tcfg); err != nil {
		return nil, err
	}
	gen := map[string]any{"bos_token_id": c.BosTokenID, "eos_token_id": c.EosTokenID}
	gj, err := json.MarshalIndent(gen, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(out, "generation_config.json"), append(gj, '\n')); err != nil {
		return nil, err
	}
	sum.Files = append(files, "tokenizer.json", "tokenizer_config.json", "generation_config.json")
	return sum, nil
}
