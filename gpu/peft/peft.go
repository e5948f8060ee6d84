package peft

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"swerl/gpu"
	"swerl/gpu/arch"
	"swerl/gpu/hf"
	"swerl/internal/atomicfile"
)

// File names of an adapter directory.
const (
	ConfigFile  = "adapter_config.json"
	WeightsFile = "adapter_model.safetensors"
)

// Bounds Read accepts: ranks beyond MaxRank and alphas beyond MaxAlpha
// are far outside published practice (LoRA ranks are 1..512) and only
// make a hostile file expensive.
const (
	MaxRank  = 65536
	MaxAlpha = 1 << 20
)

// maxConfigBytes bounds adapter_config.json (PEFT writes about 1 KiB).
const maxConfigBytes = 1 << 20

// Modules are the linear modules of a decoder layer an adapter may target,
// in layer order, with PEFT's names.
var Modules = gpu.LoRAModules

// ModulePath returns the Hugging Face path of module in layer l, without
// the ".weight" suffix: "model.layers.0.self_attn.q_proj". ok is false for
// a name not in Modules.
func ModulePath(l int, module string) (path string, ok bool) {
	switch module {
	case "q_proj", "k_proj", "v_proj", "o_proj":
		return fmt.Sprintf("model.layers.%d.self_attn.%s", l, module), true
	case "gate_proj", "up_proj", "down_proj":
		return fmt.Sprintf("model.layers.%d.mlp.%s", l, module), true
	}
	return "", false
}

// ModuleShape returns the [out, in] shape of module's weight in c.
func ModuleShape(c gpu.Config, module string) (out, in int, ok bool) {
	C, I := c.HiddenSize, c.IntermediateSize
	QC, KVC := c.NumAttentionHeads*c.HeadSize(), c.KVHeads()*c.HeadSize()
	switch module {
	case "q_proj":
		return QC, C, true
	case "k_proj", "v_proj":
		return KVC, C, true
	case "o_proj":
		return C, QC, true
	case "gate_proj", "up_proj":
		return I, C, true
	case "down_proj":
		return C, I, true
	}
	return 0, 0, false
}

// prefix is what PEFT puts before the base model's parameter names.
const prefix = "base_model.model."

// TensorName returns the PEFT name of the A (b false) or B (b true) half
// of the adapter on module in layer l, e.g.
// "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight".
func TensorName(l int, module string, b bool) string {
	p, _ := ModulePath(l, module)
	half := ".lora_A.weight"
	if b {
		half = ".lora_B.weight"
	}
	return prefix + p + half
}

// parseName is TensorName's inverse; ok is false for any other name.
func parseName(name string) (l int, module string, b, ok bool) {
	rest, found := strings.CutPrefix(name, prefix+"model.layers.")
	if !found {
		return 0, "", false, false
	}
	num, rest, found := strings.Cut(rest, ".")
	if !found {
		return 0, "", false, false
	}
	l, err := strconv.Atoi(num)
	if err != nil || l < 0 || strconv.Itoa(l) != num {
		return 0, "", false, false
	}
	for _, m := range Modules {
		for _, half := range []bool{false, true} {
			if TensorName(l, m, half) == name {
				return l, m, half, true
			}
		}
	}
	return 0, "", false, false
}

// AdapterConfig is adapter_config.json. The zero values of the fields
// after TargetModules are what PEFT writes by default, except TaskType,
// InferenceMode and Bias, which Write fills ("CAUSAL_LM", true, "none").
type AdapterConfig struct {
	PeftType            string   `json:"peft_type"` // "LORA"
	TaskType            string   `json:"task_type"` // "CAUSAL_LM"
	R                   int      `json:"r"`
	LoraAlpha           float64  `json:"lora_alpha"`
	TargetModules       []string `json:"target_modules"`
	BaseModelNameOrPath string   `json:"base_model_name_or_path"`
	Bias                string   `json:"bias"` // "none": base biases untouched
	LoraDropout         float64  `json:"lora_dropout"`
	FanInFanOut         bool     `json:"fan_in_fan_out"`
	InferenceMode       bool     `json:"inference_mode"`
	UseRSLoRA           bool     `json:"use_rslora"`
	UseDoRA             bool     `json:"use_dora"`
	// The fields below must be empty: swerl writes and reads uniform
	// adapters (one rank and alpha, every layer, no extra trained modules).
	ModulesToSave     []string           `json:"modules_to_save"`
	LayersToTransform json.RawMessage    `json:"layers_to_transform"`
	RankPattern       map[string]float64 `json:"rank_pattern"`
	AlphaPattern      map[string]float64 `json:"alpha_pattern"`
}

// Scale is the factor of the low-rank product: lora_alpha / r.
func (c AdapterConfig) Scale() float64 { return c.LoraAlpha / float64(c.R) }

// Validate reports the first field that makes the config unusable here.
func (c AdapterConfig) Validate() error {
	switch {
	case c.PeftType != "LORA":
		return fmt.Errorf("peft_type %q, want LORA", c.PeftType)
	case c.TaskType != "" && c.TaskType != "CAUSAL_LM":
		return fmt.Errorf("task_type %q, want CAUSAL_LM", c.TaskType)
	case c.R < 1 || c.R > MaxRank:
		return fmt.Errorf("r %d outside [1, %d]", c.R, MaxRank)
	case !(c.LoraAlpha > 0 && c.LoraAlpha <= MaxAlpha):
		return fmt.Errorf("lora_alpha %v outside (0, %d]", c.LoraAlpha, MaxAlpha)
	case len(c.TargetModules) == 0:
		return errors.New("target_modules is empty")
	case c.Bias != "" && c.Bias != "none":
		return fmt.Errorf("bias %q is not supported (want none)", c.Bias)
	case c.FanInFanOut:
		return errors.New("fan_in_fan_out is not supported")
	case c.UseRSLoRA:
		return errors.New("use_rslora is not supported")
	case c.UseDoRA:
		return errors.New("use_dora is not supported")
	case len(c.ModulesToSave) > 0:
		return fmt.Errorf("modules_to_save %v is not supported", c.ModulesToSave)
	case len(c.LayersToTransform) > 0 && string(c.LayersToTransform) != "null":
		return errors.New("layers_to_transform is not supported")
	case len(c.RankPattern) > 0 || len(c.AlphaPattern) > 0:
		return errors.New("rank_pattern and alpha_pattern are not supported")
	}
	seen := map[string]bool{}
	for _, m := range c.TargetModules {
		if !slices.Contains(Modules, m) {
			return fmt.Errorf("target module %q is not one of %v", m, Modules)
		}
		if seen[m] {
			return fmt.Errorf("target module %q listed twice", m)
		}
		seen[m] = true
	}
	return nil
}

// UnmarshalJSON decodes adapter_config.json. A target_modules string (a
// regular expression or "all-linear" in PEFT) is rejected by name:
// adapters here list their modules.
func (c *AdapterConfig) UnmarshalJSON(b []byte) error {
	type plain AdapterConfig
	var raw struct {
		plain
		TargetModules json.RawMessage `json:"target_modules"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*c = AdapterConfig(raw.plain)
	c.TargetModules = nil
	if len(raw.TargetModules) == 0 || string(raw.TargetModules) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw.TargetModules, &c.TargetModules); err != nil {
		return fmt.Errorf("target_modules must be a list of module names: %s", bytes.TrimSpace(raw.TargetModules))
	}
	return nil
}

// Adapter is an adapter config and its tensors (PEFT names, row-major
// float32; see TensorName).
type Adapter struct {
	Config  AdapterConfig
	Tensors []gpu.Tensor
}

// specs lists the tensors an adapter with config c has on a base with L
// layers, shapes from shape(module): A then B per module, in layer and
// Modules order.
func specs(c AdapterConfig, L int, shape func(module string) (out, in int)) []arch.TensorSpec {
	var out []arch.TensorSpec
	for l := range L {
		for _, m := range Modules {
			if !slices.Contains(c.TargetModules, m) {
				continue
			}
			o, i := shape(m)
			out = append(out,
				arch.TensorSpec{Name: TensorName(l, m, false), Shape: []int{c.R, i}},
				arch.TensorSpec{Name: TensorName(l, m, true), Shape: []int{o, c.R}})
		}
	}
	return out
}

// Check validates the adapter on its own (config, tensor names, both
// halves of every configured module in every layer, shapes consistent
// with r and across layers, data matching the shapes) and, when base is
// not nil, against that architecture (its layer count and module shapes).
func (a *Adapter) Check(base *gpu.Config) error {
	if err := a.Config.Validate(); err != nil {
		return err
	}
	got := make([]arch.TensorSpec, len(a.Tensors))
	for i, t := range a.Tensors {
		if arch.Numel(t.Shape) != len(t.Data) {
			return fmt.Errorf("tensor %q: shape %v holds %d values, data has %d", t.Name, t.Shape, arch.Numel(t.Shape), len(t.Data))
		}
		got[i] = arch.TensorSpec{Name: t.Name, Shape: t.Shape}
	}
	_, err := checkSpecs(a.Config, got, base)
	return err
}

// checkSpecs checks tensor names and shapes against a valid config c (and
// base when not nil) and returns the expected list in canonical order.
func checkSpecs(c AdapterConfig, got []arch.TensorSpec, base *gpu.Config) ([]arch.TensorSpec, error) {
	layers := 0
	dims := map[string][2]int{} // module -> [out, in] as the tensors give them
	for _, t := range got {
		if len(t.Shape) != 2 {
			return nil, fmt.Errorf("tensor %q has shape %v, want a matrix", t.Name, t.Shape)
		}
		l, m, b, ok := parseName(t.Name)
		if !ok {
			return nil, fmt.Errorf("tensor %q is not a PEFT LoRA name like %s", t.Name, TensorName(0, "q_proj", false))
		}
		layers = max(layers, l+1)
		d := dims[m]
		if b {
			d[0] = t.Shape[0]
		} else {
			d[1] = t.Shape[1]
		}
		dims[m] = d
	}
	shape := func(m string) (int, int) { return dims[m][0], dims[m][1] }
	if base != nil {
		if layers > base.NumHiddenLayers {
			return nil, fmt.Errorf("tensors reach layer %d, the base has %d layers", layers-1, base.NumHiddenLayers)
		}
		layers = base.NumHiddenLayers
		shape = func(m string) (int, int) {
			o, i, _ := ModuleShape(*base, m)
			return o, i
		}
	}
	if layers == 0 {
		return nil, errors.New("adapter has no tensors")
	}
	// Each layer holds at least two tensors, so a layer number beyond the
	// tensor count is refused before the expected list (sized by it) is
	// built.
	if layers > len(got) {
		return nil, fmt.Errorf("tensors reach layer %d but there are only %d of them", layers-1, len(got))
	}
	want := specs(c, layers, shape)
	if err := hf.CheckTensors(want, got); err != nil {
		return nil, fmt.Errorf("adapter %w", err)
	}
	return want, nil
}

// Write writes a into dir (created 0755 if needed): adapter_config.json
// and adapter_model.safetensors (F32), both 0644. It fills the defaults
// named on AdapterConfig and checks the adapter first.
func Write(dir string, a *Adapter) error {
	c := a.Config
	if c.TaskType == "" {
		c.TaskType = "CAUSAL_LM"
	}
	if c.Bias == "" {
		c.Bias = "none"
	}
	c.InferenceMode = true
	if c.RankPattern == nil {
		c.RankPattern = map[string]float64{}
	}
	if c.AlphaPattern == nil {
		c.AlphaPattern = map[string]float64{}
	}
	if err := (&Adapter{Config: c, Tensors: a.Tensors}).Check(nil); err != nil {
		return fmt.Errorf("peft: write %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("peft: %w", err)
	}
	// MkdirAll applies the umask; engines reading as another user need
	// to list the directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("peft: %w", err)
	}
	if err := hf.WriteSafetensors(filepath.Join(dir, WeightsFile), a.Tensors, hf.F32, nil); err != nil {
		return fmt.Errorf("peft: %w", err)
	}
	cj, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("peft: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, ConfigFile), append(cj, '\n')); err != nil {
		return fmt.Errorf("peft: %w", err)
	}
	return nil
}

// Read reads and checks the adapter in dir (see Adapter.Check with no
// base).
func Read(dir string) (*Adapter, error) { return read(dir, nil) }

// ReadFor reads the adapter in dir and checks it against the base
// architecture base.
func ReadFor(dir string, base gpu.Config) (*Adapter, error) { return read(dir, &base) }

// ReadConfig reads and validates dir's adapter_config.json only.
func ReadConfig(dir string) (AdapterConfig, error) {
	var c AdapterConfig
	cpath := filepath.Join(dir, ConfigFile)
	cj, err := readBounded(cpath, maxConfigBytes)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(cj, &c); err != nil {
		return c, fmt.Errorf("peft: %s: %w", cpath, err)
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("peft: %s: %w", cpath, err)
	}
	return c, nil
}

func read(dir string, base *gpu.Config) (*Adapter, error) {
	c, err := ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	a := &Adapter{Config: c}
	wpath := filepath.Join(dir, WeightsFile)
	st, err := hf.OpenSafetensors(wpath)
	if err != nil {
		return nil, fmt.Errorf("peft: %w", err)
	}
	defer st.Close()
	// Names and shapes from the header are checked before any data is
	// read; the tensors come back in canonical order whatever the file's.
	got := make([]arch.TensorSpec, len(st.Tensors()))
	for i, ti := range st.Tensors() {
		got[i] = arch.TensorSpec{Name: ti.Name, Shape: ti.Shape}
	}
	want, err := checkSpecs(a.Config, got, base)
	if err != nil {
		return nil, fmt.Errorf("peft: %s: %w", wpath, err)
	}
	a.Tensors = make([]gpu.Tensor, len(want))
	for i, s := range want {
		data, err := st.ReadFloat32(s.Name, nil)
		if err != nil {
			return nil, fmt.Errorf("peft: %w", err)
		}
		if !finite(data) {
			return nil, fmt.Errorf("peft: %s: tensor %q has a NaN or infinite value", wpath, s.Name)
		}
		a.Tensors[i] = gpu.Tensor{Name: s.Name, Shape: s.Shape, Data: data}
	}
	return a, nil
}

// readBounded is hf.ReadLimited with this package's error prefix.
func readBounded(path string, limit int64) ([]byte, error) {
	data, err := hf.ReadLimited(path, limit)
	if err != nil {
		return nil, fmt.Errorf("peft: %w", err)
	}
	return data, nil
}

// Merge adds (lora_alpha/r)·B·A to the weight of every adapted module of
// m, in place on its host arena, after checking a against m's
// architecture (gpu.LoRA.Merge does the arithmetic).
func Merge(m *gpu.Model, a *Adapter) error {
	if err := a.Check(&m.Config); err != nil {
		return fmt.Errorf("peft: merge: %w", err)
	}
	lo, err := a.LoRA(m.Config)
	if err != nil {
		return fmt.Errorf("peft: merge: %w", err)
	}
	return lo.Merge(m)
}

// LoRA returns the adapter as gpu adapters on the base architecture base
// (to train on or merge), after checking it against base.
func (a *Adapter) LoRA(base gpu.Config) (*gpu.LoRA, error) {
	if err := a.Check(&base); err != nil {
		return nil, err
	}
	lo, err := gpu.NewLoRA(base, gpu.LoRAConfig{Rank: a.Config.R, Alpha: a.Config.LoraAlpha, Targets: a.Config.TargetModules})
	if err != nil {
		return nil, err
	}
	return lo, lo.SetTensors(a.Tensors)
}

// FromLoRA returns the adapter file form of lo, for a base found at
// baseModel (base_model_name_or_path). Its tensors alias lo's arena.
func FromLoRA(lo *gpu.LoRA, baseModel string) *Adapter {
	c := lo.Config()
	return &Adapter{
		Config: AdapterConfig{PeftType: "LORA", TaskType: "CAUSAL_LM", R: c.Rank, LoraAlpha: c.Alpha,
			TargetModules: slices.Clone(c.Targets), BaseModelNameOrPath: baseModel, Bias: "none", InferenceMode: true},
		Tensors: lo.Tensors(),
	}
}

// finite reports whether every value of x is finite.
func finite(x []float32) bool {
	for _, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return false
		}
	}
	return true
}
