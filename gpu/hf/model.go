package hf

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"swerl/internal/atomicfile"
)

// File names of the Hugging Face model directory layout.
const (
	ConfigFile       = "config.json"
	WeightsFile      = "model.safetensors"
	WeightsIndexFile = "model.safetensors.index.json"
)

// Arch is the part of config.json that fixes the tensor names and shapes
// of the Llama-style decoder family (Llama, Mistral, Qwen2). Its JSON keys
// are those of config.json.
type Arch struct {
	ModelType         string `json:"model_type"`
	HiddenSize        int    `json:"hidden_size"`
	IntermediateSize  int    `json:"intermediate_size"`
	NumHiddenLayers   int    `json:"num_hidden_layers"`
	NumAttentionHeads int    `json:"num_attention_heads"`
	NumKeyValueHeads  int    `json:"num_key_value_heads"`
	HeadDim           int    `json:"head_dim"`
	VocabSize         int    `json:"vocab_size"`
	TieWordEmbeddings bool   `json:"tie_word_embeddings"`
	AttentionBias     *bool  `json:"attention_bias"`
}

// architectures maps model_type to the transformers class that config.json
// must name for transformers and vLLM to load it.
var architectures = map[string]string{
	"llama":   "LlamaForCausalLM",
	"mistral": "MistralForCausalLM",
	"qwen2":   "Qwen2ForCausalLM",
}

// ParseArch reads the architecture from config.json bytes and validates
// it. A qwen2 config without attention_bias has q/k/v biases, as in
// transformers.
func ParseArch(configJSON []byte) (Arch, error) {
	var a Arch
	if err := json.Unmarshal(configJSON, &a); err != nil {
		return a, fmt.Errorf("hf: parse config.json: %w", err)
	}
	if a.AttentionBias == nil {
		b := a.ModelType == "qwen2"
		a.AttentionBias = &b
	}
	return a, a.Validate()
}

// Validate names the first field of a that is unusable.
func (a Arch) Validate() error {
	if _, ok := architectures[a.ModelType]; !ok {
		return fmt.Errorf("hf: config model_type %q is not supported (want llama, mistral or qwen2)", a.ModelType)
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"hidden_size", a.HiddenSize}, {"intermediate_size", a.IntermediateSize},
		{"num_hidden_layers", a.NumHiddenLayers}, {"num_attention_heads", a.NumAttentionHeads},
		{"vocab_size", a.VocabSize},
	} {
		if f.v <= 0 {
			return fmt.Errorf("hf: config %s must be positive, got %d", f.name, f.v)
		}
	}
	if a.kvHeads() <= 0 || a.NumAttentionHeads%a.kvHeads() != 0 {
		return fmt.Errorf("hf: config num_attention_heads %d is not a multiple of num_key_value_heads %d", a.NumAttentionHeads, a.kvHeads())
	}
	if a.HeadDim == 0 && a.HiddenSize%a.NumAttentionHeads != 0 {
		return fmt.Errorf("hf: config hidden_size %d is not a multiple of num_attention_heads %d", a.HiddenSize, a.NumAttentionHeads)
	}
	return nil
}

func (a Arch) kvHeads() int {
	if a.NumKeyValueHeads == 0 {
		return a.NumAttentionHeads
	}
	return a.NumKeyValueHeads
}

func (a Arch) headDim() int {
	if a.HeadDim > 0 {
		return a.HeadDim
	}
	return a.HiddenSize / a.NumAttentionHeads
}

// TensorSpec is the name and shape of one tensor of an architecture.
type TensorSpec struct {
	Name  string
	Shape []int
}

// Tensors returns the tensors transformers expects for a, in the order
// swerl writes them: embeddings, then each layer (norms, attention,
// MLP), the final norm, and lm_head unless the embeddings are tied.
func (a Arch) Tensors() []TensorSpec {
	C, I, V := a.HiddenSize, a.IntermediateSize, a.VocabSize
	Q, KV := a.NumAttentionHeads*a.headDim(), a.kvHeads()*a.headDim()
	bias := a.AttentionBias != nil && *a.AttentionBias
	out := []TensorSpec{{"model.embed_tokens.weight", []int{V, C}}}
	for l := range a.NumHiddenLayers {
		p := fmt.Sprintf("model.layers.%d.", l)
		out = append(out,
			TensorSpec{p + "input_layernorm.weight", []int{C}},
			TensorSpec{p + "self_attn.q_proj.weight", []int{Q, C}})
		if bias {
			out = append(out, TensorSpec{p + "self_attn.q_proj.bias", []int{Q}})
		}
		out = append(out, TensorSpec{p + "self_attn.k_proj.weight", []int{KV, C}})
		if bias {
			out = append(out, TensorSpec{p + "self_attn.k_proj.bias", []int{KV}})
		}
		out = append(out, TensorSpec{p + "self_attn.v_proj.weight", []int{KV, C}})
		if bias {
			out = append(out, TensorSpec{p + "self_attn.v_proj.bias", []int{KV}})
		}
		out = append(out,
			TensorSpec{p + "self_attn.o_proj.weight", []int{C, Q}},
			TensorSpec{p + "post_attention_layernorm.weight", []int{C}},
			TensorSpec{p + "mlp.gate_proj.weight", []int{I, C}},
			TensorSpec{p + "mlp.up_proj.weight", []int{I, C}},
			TensorSpec{p + "mlp.down_proj.weight", []int{C, I}})
	}
	out = append(out, TensorSpec{"model.norm.weight", []int{C}})
	if !a.TieWordEmbeddings {
		out = append(out, TensorSpec{"lm_head.weight", []int{V, C}})
	}
	return out
}

// CheckTensors reports, in one error, every tensor of want that is missing
// from got or has another shape, and every tensor of got that want does
// not have.
func CheckTensors(want []TensorSpec, got []Tensor) error {
	have := map[string][]int{}
	for _, t := range got {
		have[t.Name] = t.Shape
	}
	var probs []string
	seen := map[string]bool{}
	for _, w := range want {
		seen[w.Name] = true
		s, ok := have[w.Name]
		switch {
		case !ok:
			probs = append(probs, "missing "+w.Name)
		case !equalInts(s, w.Shape):
			probs = append(probs, fmt.Sprintf("%s has shape %v, want %v", w.Name, s, w.Shape))
		}
	}
	for _, t := range got {
		if !seen[t.Name] {
			probs = append(probs, "unexpected "+t.Name)
		}
	}
	if len(probs) == 0 {
		return nil
	}
	if len(probs) > 8 {
		probs = append(probs[:8], fmt.Sprintf("and %d more", len(probs)-8))
	}
	return fmt.Errorf("hf: tensors do not match config.json: %s", strings.Join(probs, "; "))
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ConfigJSON returns config.json for a model saved as dt: the fields of cfg
// (any value whose JSON form is an object with config.json keys, such as
// gpu.Config or Arch) plus the keys transformers and vLLM need to pick the
// model class: architectures (from model_type, unless cfg sets it),
// torch_dtype, hidden_act (silu) and use_cache. Keys are sorted.
func ConfigJSON(cfg any, dt DType) ([]byte, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("hf: config: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("hf: config is not a JSON object: %w", err)
	}
	mt, _ := m["model_type"].(string)
	arch, ok := architectures[mt]
	if !ok {
		return nil, fmt.Errorf("hf: config model_type %q is not supported (want llama, mistral or qwen2)", mt)
	}
	if _, ok := m["architectures"]; !ok {
		m["architectures"] = []string{arch}
	}
	if dt.TorchName() == "" {
		return nil, fmt.Errorf("hf: unsupported dtype %q", dt)
	}
	m["torch_dtype"] = dt.TorchName()
	for k, v := range map[string]any{"hidden_act": "silu", "use_cache": true} {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("hf: config: %w", err)
	}
	return append(out, '\n'), nil
}

// SaveOptions controls SaveWeights. The zero value writes one F32 file.
type SaveOptions struct {
	// DType is the element type on disk. Default F32.
	DType DType
	// MaxShardBytes splits the weights into model-0000i-of-0000n.safetensors
	// files of at most this many data bytes each (a tensor larger than the
	// limit gets a shard of its own), plus model.safetensors.index.json.
	// Default 0: a single model.safetensors.
	MaxShardBytes int64
}

func (o SaveOptions) dtype() DType {
	if o.DType == "" {
		return F32
	}
	return o.DType
}

// SaveWeights writes tensors into dir as model.safetensors, or as shards
// with their index, each file atomically. It returns the names of the
// files written, relative to dir.
func SaveWeights(dir string, tensors []Tensor, opt SaveOptions) ([]string, error) {
	dt := opt.dtype()
	if dt.Size() == 0 {
		return nil, fmt.Errorf("hf: unsupported dtype %q", dt)
	}
	var shards [][]Tensor
	var size int64
	for _, t := range tensors {
		b := int64(len(t.Data) * dt.Size())
		if len(shards) == 0 || (opt.MaxShardBytes > 0 && size+b > opt.MaxShardBytes && size > 0) {
			shards = append(shards, nil)
			size = 0
		}
		shards[len(shards)-1] = append(shards[len(shards)-1], t)
		size += b
	}
	if opt.MaxShardBytes <= 0 || len(shards) <= 1 {
		if err := WriteSafetensors(filepath.Join(dir, WeightsFile), tensors, dt, nil); err != nil {
			return nil, err
		}
		return []string{WeightsFile}, nil
	}
	var files []string
	index := struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}{map[string]int64{"total_size": 0}, map[string]string{}}
	for i, sh := range shards {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
		if err := WriteSafetensors(filepath.Join(dir, name), sh, dt, nil); err != nil {
			return nil, err
		}
		for _, t := range sh {
			index.WeightMap[t.Name] = name
			index.Metadata["total_size"] += int64(len(t.Data) * dt.Size())
		}
		files = append(files, name)
	}
	data, err := json.MarshalIndent(index, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("hf: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, WeightsIndexFile), append(data, '\n')); err != nil {
		return nil, err
	}
	return append(files, WeightsIndexFile), nil
}

// Save writes a whole model directory: config.json (see ConfigJSON) and
// the weights (see SaveWeights). The tokenizer files are written by the
// tokenizer package. It returns the names of the files written.
func Save(dir string, cfg any, tensors []Tensor, opt SaveOptions) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("hf: %w", err)
	}
	cj, err := ConfigJSON(cfg, opt.dtype())
	if err != nil {
		return nil, err
	}
	files, err := SaveWeights(dir, tensors, opt)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, ConfigFile), cj); err != nil {
		return nil, err
	}
	return append(files, ConfigFile), nil
}

// WeightFiles returns the safetensors files of a model directory and, for
// a sharded model, the tensor → file map of its index. Every file the index
// names must exist.
func WeightFiles(dir string) (files []string, weightMap map[string]string, err error) {
	idx := filepath.Join(dir, WeightsIndexFile)
	data, err := os.ReadFile(idx)
	switch {
	case err == nil:
		var index struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(data, &index); err != nil {
			return nil, nil, fmt.Errorf("hf: parse %s: %w", idx, err)
		}
		if len(index.WeightMap) == 0 {
			return nil, nil, fmt.Errorf("hf: %s: empty weight_map", idx)
		}
		set := map[string]bool{}
		for name, f := range index.WeightMap {
			if f == "" || filepath.Base(f) != f {
				return nil, nil, fmt.Errorf("hf: %s: tensor %q maps to invalid file name %q", idx, name, f)
			}
			set[f] = true
		}
		for f := range set {
			files = append(files, f)
		}
		sort.Strings(files)
		return files, index.WeightMap, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, nil, fmt.Errorf("hf: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, WeightsFile)); err != nil {
		return nil, nil, fmt.Errorf("hf: %s: %w", dir, errNotFound)
	}
	return []string{WeightsFile}, nil, nil
}

// Model is a loaded model directory.
type Model struct {
	// ConfigJSON is config.json as read.
	ConfigJSON []byte
	Arch       Arch
	// DType is the on-disk element type (of the first tensor).
	DType DType
	// Tensors are in the order of Arch.Tensors, converted to float32.
	Tensors []Tensor
}

// Load reads config.json and the weights (single file or sharded) of dir,
// converts every tensor to float32 and checks names and shapes against the
// architecture; the error lists every mismatch.
func Load(dir string) (*Model, error) {
	cfgPath := filepath.Join(dir, ConfigFile)
	cj, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("hf: %w", err)
	}
	arch, err := ParseArch(cj)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, cfgPath)
	}
	files, weightMap, err := WeightFiles(dir)
	if err != nil {
		return nil, err
	}
	m := &Model{ConfigJSON: cj, Arch: arch}
	byName := map[string]Tensor{}
	var got []Tensor
	for _, f := range files {
		st, err := OpenSafetensors(filepath.Join(dir, f))
		if err != nil {
			return nil, err
		}
		for _, info := range st.Tensors() {
			if ignored(arch, info.Name) {
				continue
			}
			if weightMap != nil && weightMap[info.Name] != f {
				st.Close()
				return nil, fmt.Errorf("hf: %s: tensor %q is in %s but the index maps it to %q", dir, info.Name, f, weightMap[info.Name])
			}
			if _, dup := byName[info.Name]; dup {
				st.Close()
				return nil, fmt.Errorf("hf: %s: tensor %q appears twice", dir, info.Name)
			}
			if m.DType == "" {
				m.DType = info.DType
			}
			data, err := st.ReadFloat32(info.Name, nil)
			if err != nil {
				st.Close()
				return nil, err
			}
			t := Tensor{Name: info.Name, Shape: info.Shape, Data: data}
			byName[t.Name], got = t, append(got, t)
		}
		st.Close()
	}
	for name, f := range weightMap {
		if _, ok := byName[name]; !ok && !ignored(arch, name) {
			return nil, fmt.Errorf("hf: %s: the index maps %q to %s, which does not hold it", dir, name, f)
		}
	}
	spec := arch.Tensors()
	if err := CheckTensors(spec, got); err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, dir)
	}
	for _, s := range spec {
		m.Tensors = append(m.Tensors, byName[s.Name])
	}
	return m, nil
}

// ignored reports tensors that transformers drops on load: rotary
// inverse frequencies of old Llama exports and lm_head when the embeddings
// are tied.
func ignored(a Arch, name string) bool {
	return strings.HasSuffix(name, ".rotary_emb.inv_freq") || (a.TieWordEmbeddings && name == "lm_head.weight")
}
