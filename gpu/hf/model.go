package hf

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"swerl/gpu/arch"
	"swerl/internal/atomicfile"
)

// File names of the Hugging Face model directory layout.
const (
	ConfigFile       = "config.json"
	WeightsFile      = "model.safetensors"
	WeightsIndexFile = "model.safetensors.index.json"
)

// architectures maps model_type to the transformers class that config.json
// must name for transformers and vLLM to load it.
var architectures = map[string]string{
	"llama":   "LlamaForCausalLM",
	"mistral": "MistralForCausalLM",
	"qwen2":   "Qwen2ForCausalLM",
}

// ParseArch reads the architecture from config.json bytes and checks what
// fixes its tensors: a supported model_type and the dimension and size
// bounds of arch.Config.ValidateShape, so nothing sized by the file is
// allocated before its numbers are known to be sane. A qwen2 config
// without attention_bias has q/k/v biases, as in transformers.
func ParseArch(configJSON []byte) (arch.Config, error) {
	var c arch.Config
	if err := json.Unmarshal(configJSON, &c); err != nil {
		return c, fmt.Errorf("hf: parse config.json: %w", err)
	}
	if _, ok := architectures[c.ModelType]; !ok {
		return c, fmt.Errorf("hf: config model_type %q is not supported (want llama, mistral or qwen2)", c.ModelType)
	}
	if err := c.ValidateShape(); err != nil {
		return c, fmt.Errorf("hf: %w", err)
	}
	return c, nil
}

// CheckTensors reports, in one error, every tensor of want that is missing
// from got or has another shape, and every tensor of got that want does
// not have.
func CheckTensors(want, got []arch.TensorSpec) error {
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
		case !slices.Equal(s, w.Shape):
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

// ConfigJSON returns config.json for a model saved as dt: the fields of cfg
// (any value whose JSON form is an object with config.json keys, such as
// arch.Config) plus the keys transformers and vLLM need to pick the
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
	data, err := readBounded(idx, maxIndexBytes)
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
		return nil, nil, err
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
	Config     arch.Config
	// DType is the on-disk element type (of the first tensor).
	DType DType
	// Tensors are in the order of Config.Tensors, converted to float32.
	Tensors []Tensor
}

// Load reads config.json and the weights (single file or sharded) of dir,
// converting every tensor to float32 (see Open).
func Load(dir string) (*Model, error) {
	d, err := Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	m := &Model{ConfigJSON: d.ConfigJSON, Config: d.Config, DType: d.DType}
	for _, s := range d.Config.Tensors() {
		m.Tensors = append(m.Tensors, Tensor{Name: s.Name, Shape: s.Shape, Data: make([]float32, arch.Numel(s.Shape))})
	}
	if err := d.ReadInto(m.Tensors); err != nil {
		return nil, err
	}
	return m, nil
}

// Dir is a model directory whose config.json and safetensors headers have
// been read and checked against each other; no tensor data has been read.
type Dir struct {
	Path string
	// ConfigJSON is config.json as read.
	ConfigJSON []byte
	Config     arch.Config
	// DType is the on-disk element type (of the first tensor).
	DType  DType
	files  []*Safetensors
	source map[string]*Safetensors // tensor name → the file holding it
}

// Bounds on the JSON files of a model directory, read whole: real ones are
// a few kilobytes (config.json) and well under a megabyte (the index of a
// 405B model).
const (
	maxConfigBytes = 16 << 20
	maxIndexBytes  = 64 << 20
)

// Open reads config.json (see ParseArch) and the headers of the weights
// (single file or sharded), and checks every tensor name and shape against
// the architecture, reporting all mismatches at once, before any tensor
// data is read. The files stay open for ReadInto until Close.
func Open(dir string) (*Dir, error) {
	cfgPath := filepath.Join(dir, ConfigFile)
	cj, err := readBounded(cfgPath, maxConfigBytes)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseArch(cj)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, cfgPath)
	}
	files, weightMap, err := WeightFiles(dir)
	if err != nil {
		return nil, err
	}
	d := &Dir{Path: dir, ConfigJSON: cj, Config: cfg, source: map[string]*Safetensors{}}
	var got []arch.TensorSpec
	for _, f := range files {
		st, err := OpenSafetensors(filepath.Join(dir, f))
		if err != nil {
			d.Close()
			return nil, err
		}
		d.files = append(d.files, st)
		for _, info := range st.Tensors() {
			if ignored(cfg, info.Name) {
				continue
			}
			if weightMap != nil && weightMap[info.Name] != f {
				d.Close()
				return nil, fmt.Errorf("hf: %s: tensor %q is in %s but the index maps it to %q", dir, info.Name, f, weightMap[info.Name])
			}
			if _, dup := d.source[info.Name]; dup {
				d.Close()
				return nil, fmt.Errorf("hf: %s: tensor %q appears twice", dir, info.Name)
			}
			if d.DType == "" {
				d.DType = info.DType
			}
			d.source[info.Name] = st
			got = append(got, arch.TensorSpec{Name: info.Name, Shape: info.Shape})
		}
	}
	for name, f := range weightMap {
		if _, ok := d.source[name]; !ok && !ignored(cfg, name) {
			d.Close()
			return nil, fmt.Errorf("hf: %s: the index maps %q to %s, which does not hold it", dir, name, f)
		}
	}
	if err := CheckTensors(cfg.Tensors(), got); err != nil {
		d.Close()
		return nil, fmt.Errorf("%w (in %s)", err, dir)
	}
	return d, nil
}

// ReadInto fills each tensor's Data, converted to float32, from the file
// holding the tensor of that name, which must have the same shape. Data
// must have exactly the shape's element count.
func (d *Dir) ReadInto(ts []Tensor) error {
	for _, t := range ts {
		st := d.source[t.Name]
		if st == nil {
			return fmt.Errorf("hf: %s: no tensor %q", d.Path, t.Name)
		}
		info, _ := st.Info(t.Name)
		if !slices.Equal(info.Shape, t.Shape) || len(t.Data) != arch.Numel(t.Shape) {
			return fmt.Errorf("hf: %s: tensor %q has shape %v on disk, the destination shape %v and %d elements", d.Path, t.Name, info.Shape, t.Shape, len(t.Data))
		}
		if _, err := st.ReadFloat32(t.Name, t.Data); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the weight files.
func (d *Dir) Close() error {
	var errs []error
	for _, st := range d.files {
		errs = append(errs, st.Close())
	}
	d.files = nil
	return errors.Join(errs...)
}

// ReadLimited reads the file at path, refusing one larger than limit
// bytes, so that a hostile model directory cannot make a reader hold an
// unbounded config or index file. Errors name the path.
func ReadLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

func readBounded(path string, limit int64) ([]byte, error) {
	data, err := ReadLimited(path, limit)
	if err != nil {
		return nil, fmt.Errorf("hf: %w", err)
	}
	return data, nil
}

// ignored reports tensors that transformers drops on load: rotary
// inverse frequencies of old Llama exports and lm_head when the embeddings
// are tied.
func ignored(c arch.Config, name string) bool {
	return strings.HasSuffix(name, ".rotary_emb.inv_freq") || (c.TieWordEmbeddings && name == "lm_head.weight")
}
