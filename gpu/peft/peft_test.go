package peft

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"swerl/gpu"
	"swerl/gpu/arch"
)

// randomAdapter builds an adapter on c for modules with random A and B.
func randomAdapter(c gpu.Config, r int, alpha float64, modules []string, seed uint64) *Adapter {
	rng := rand.New(rand.NewPCG(seed, 1))
	a := &Adapter{Config: AdapterConfig{PeftType: "LORA", R: r, LoraAlpha: alpha, TargetModules: modules, BaseModelNameOrPath: "/models/base"}}
	for l := range c.NumHiddenLayers {
		for _, m := range Modules {
			if !slices.Contains(modules, m) {
				continue
			}
			out, in, _ := ModuleShape(c, m)
			for _, b := range []bool{false, true} {
				shape := []int{r, in}
				if b {
					shape = []int{out, r}
				}
				data := make([]float32, shape[0]*shape[1])
				for i := range data {
					data[i] = float32(rng.NormFloat64())
				}
				a.Tensors = append(a.Tensors, gpu.Tensor{Name: TensorName(l, m, b), Shape: shape, Data: data})
			}
		}
	}
	return a
}

func TestWriteReadRoundTrip(t *testing.T) {
	old := syscall.Umask(0o077) // engines read as another user: modes must not follow the umask
	defer syscall.Umask(old)
	c := gpu.TinyConfig()
	a := randomAdapter(c, 4, 8, Modules, 1)
	dir := filepath.Join(t.TempDir(), "v000001")
	if err := Write(dir, a); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, ConfigFile), filepath.Join(dir, WeightsFile)} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o644)
		if st.IsDir() {
			want = 0o755 | os.ModeDir
		}
		if st.Mode() != want {
			t.Errorf("%s has mode %v, want %v", p, st.Mode(), want)
		}
	}
	got, err := ReadFor(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	if got.Config.TaskType != "CAUSAL_LM" || got.Config.Bias != "none" || !got.Config.InferenceMode ||
		got.Config.R != 4 || got.Config.LoraAlpha != 8 || got.Config.BaseModelNameOrPath != "/models/base" {
		t.Errorf("config read back as %+v", got.Config)
	}
	if len(got.Tensors) != len(a.Tensors) {
		t.Fatalf("%d tensors read back, wrote %d", len(got.Tensors), len(a.Tensors))
	}
	for i, w := range a.Tensors {
		g := got.Tensors[i]
		if g.Name != w.Name || !slices.Equal(g.Shape, w.Shape) || !slices.Equal(g.Data, w.Data) {
			t.Fatalf("tensor %d: read %s %v, wrote %s %v (or the data differs)", i, g.Name, g.Shape, w.Name, w.Shape)
		}
	}
}

// TestIndependentReader parses the files with python3's json and struct
// (no PEFT, no numpy): the keys an engine reads, every tensor name, dtype,
// shape and byte range, and the first value of each tensor.
func TestIndependentReader(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	c := gpu.TinyConfig()
	a := randomAdapter(c, 2, 16, []string{"q_proj", "v_proj", "down_proj"}, 2)
	dir := t.TempDir()
	if err := Write(dir, a); err != nil {
		t.Fatal(err)
	}
	const script = `
import json, struct, sys
d = sys.argv[1]
cfg = json.load(open(d + "/adapter_config.json"))
raw = open(d + "/adapter_model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
meta = hdr.pop("__metadata__", {})
data = raw[8 + n:]
out = {"config": cfg, "format": meta.get("format"), "tensors": {}}
end = 0
for name, e in hdr.items():
    b, f = e["data_offsets"]
    count = 1
    for s in e["shape"]:
        count *= s
    assert e["dtype"] == "F32" and f - b == 4 * count, name
    end = max(end, f)
    out["tensors"][name] = {"shape": e["shape"], "first": struct.unpack("<f", data[b:b + 4])[0]}
assert end == len(data)
print(json.dumps(out))
`
	cmd := exec.Command(py, "-c", script, dir)
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 reader: %v", err)
	}
	var got struct {
		Config  map[string]any
		Format  string
		Tensors map[string]struct {
			Shape []int
			First float32
		}
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Format != "pt" {
		t.Errorf("safetensors format %q, want pt (transformers refuses others)", got.Format)
	}
	for k, want := range map[string]any{"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 2.0, "lora_alpha": 16.0,
		"bias": "none", "base_model_name_or_path": "/models/base", "use_dora": false, "use_rslora": false} {
		if got.Config[k] != want {
			t.Errorf("adapter_config.json %s = %v, want %v", k, got.Config[k], want)
		}
	}
	if tm, _ := json.Marshal(got.Config["target_modules"]); string(tm) != `["q_proj","v_proj","down_proj"]` {
		t.Errorf("target_modules %s", tm)
	}
	if len(got.Tensors) != len(a.Tensors) {
		t.Fatalf("python reads %d tensors, wrote %d", len(got.Tensors), len(a.Tensors))
	}
	for _, w := range a.Tensors {
		g, ok := got.Tensors[w.Name]
		if !ok || !slices.Equal(g.Shape, w.Shape) || g.First != w.Data[0] {
			t.Errorf("python reads %s as %+v, wrote shape %v first %v", w.Name, g, w.Shape, w.Data[0])
		}
	}
	// Spot-check the names against PEFT's spelling, written out by hand.
	for _, name := range []string{
		"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
		"base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight",
		"base_model.model.model.layers.1.mlp.down_proj.lora_A.weight",
	} {
		if _, ok := got.Tensors[name]; !ok {
			t.Errorf("no tensor %s", name)
		}
	}
	C, I := c.HiddenSize, c.IntermediateSize
	if s := got.Tensors["base_model.model.model.layers.1.mlp.down_proj.lora_A.weight"].Shape; !slices.Equal(s, []int{2, I}) {
		t.Errorf("down_proj lora_A shape %v, want [2 %d]", s, I)
	}
	if s := got.Tensors["base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"].Shape; !slices.Equal(s, []int{C, 2}) {
		t.Errorf("down_proj lora_B shape %v, want [%d 2]", s, C)
	}
}

// writeRaw writes an adapter directory from raw bytes.
func writeRaw(t testing.TB, cfg, weights []byte) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, WeightsFile), weights, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// goodFiles returns the bytes of a valid adapter's two files.
func goodFiles(t testing.TB, modules []string) (cfg, weights []byte) {
	dir := t.TempDir()
	if err := Write(dir, randomAdapter(gpu.TinyConfig(), 2, 4, modules, 3)); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	weights, err = os.ReadFile(filepath.Join(dir, WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, weights
}

func setKey(t testing.TB, cj []byte, key string, value any) []byte {
	var m map[string]any
	if err := json.Unmarshal(cj, &m); err != nil {
		t.Fatal(err)
	}
	m[key] = value
	b, _ := json.Marshal(m)
	return b
}

// safetensors builds a file of F32 tensors from names and shapes, in order.
func safetensors(entries ...any) []byte {
	h := map[string]any{}
	off := 0
	for i := 0; i < len(entries); i += 2 {
		shape := entries[i+1].([]int)
		n := 4 * arch.Numel(shape)
		h[entries[i].(string)] = map[string]any{"dtype": "F32", "shape": shape, "data_offsets": []int{off, off + n}}
		off += n
	}
	hdr, _ := json.Marshal(h)
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	return append(append(b, hdr...), make([]byte, off)...)
}

func TestReadRejects(t *testing.T) {
	cfg, weights := goodFiles(t, []string{"q_proj"})
	C, QC := 64, 64
	nanWeights := slices.Clone(weights)
	binary.LittleEndian.PutUint32(nanWeights[len(nanWeights)-4:], math.Float32bits(float32(math.NaN())))
	cases := []struct {
		name    string
		cfg, w  []byte
		wantErr string
	}{
		{"not json", []byte("{"), weights, ConfigFile},
		{"peft type", setKey(t, cfg, "peft_type", "IA3"), weights, "peft_type"},
		{"rank zero", setKey(t, cfg, "r", 0), weights, "r 0"},
		{"rank huge", setKey(t, cfg, "r", 1<<40), weights, "outside"},
		{"alpha", setKey(t, cfg, "lora_alpha", -1), weights, "lora_alpha"},
		{"regex targets", setKey(t, cfg, "target_modules", ".*proj"), weights, "target_modules must be a list"},
		{"unknown module", setKey(t, cfg, "target_modules", []string{"lm_head"}), weights, "lm_head"},
		{"dora", setKey(t, cfg, "use_dora", true), weights, "use_dora"},
		{"rslora", setKey(t, cfg, "use_rslora", true), weights, "use_rslora"},
		{"rank pattern", setKey(t, cfg, "rank_pattern", map[string]int{"q_proj": 8}), weights, "rank_pattern"},
		{"layers", setKey(t, cfg, "layers_to_transform", []int{0}), weights, "layers_to_transform"},
		{"rank mismatch", setKey(t, cfg, "r", 3), weights, "shape"},
		{"module missing", setKey(t, cfg, "target_modules", []string{"q_proj", "k_proj"}), weights, "missing"},
		{"not safetensors", cfg, []byte("hello world"), WeightsFile},
		{"nan", cfg, nanWeights, "NaN"},
		{"half pair", cfg, safetensors(TensorName(0, "q_proj", false), []int{2, C}), "missing"},
		{"foreign name", cfg, safetensors("model.layers.0.self_attn.q_proj.weight", []int{QC, C}), "not a PEFT LoRA name"},
		{"vector", cfg, safetensors(TensorName(0, "q_proj", false), []int{2 * C}), "matrix"},
		{"empty", cfg, safetensors(), "no tensors"},
		{"huge layer", cfg, safetensors(strings.Replace(TensorName(0, "q_proj", false), ".0.", ".999999999.", 1), []int{2, C}), "reach layer 999999999"},
		{"leading zero layer", cfg, safetensors(strings.Replace(TensorName(0, "q_proj", false), ".0.", ".00.", 1), []int{2, C}), "not a PEFT LoRA name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(writeRaw(t, tc.cfg, tc.w))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Read: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
	// Against a base: shapes of another architecture and too many layers.
	dir := writeRaw(t, cfg, weights)
	other := gpu.TinyConfig()
	other.HiddenSize, other.NumAttentionHeads, other.NumKeyValueHeads = 32, 2, 1
	if _, err := ReadFor(dir, other); err == nil || !strings.Contains(err.Error(), "shape") {
		t.Errorf("ReadFor on another hidden size: %v", err)
	}
	one := gpu.TinyConfig()
	one.NumHiddenLayers = 1
	if _, err := ReadFor(dir, one); err == nil || !strings.Contains(err.Error(), "layer") {
		t.Errorf("ReadFor on a one-layer base: %v", err)
	}
}

// TestMergeMatchesDefinition compares Merge with W + (alpha/r)·B·A
// computed directly from the tensors, and checks that modules without an
// adapter and the other tensors are untouched.
func TestMergeMatchesDefinition(t *testing.T) {
	c := gpu.TinyConfig()
	base, err := gpu.NewModel(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := gpu.NewModel(c, 1)
	a := randomAdapter(c, 3, 6, []string{"k_proj", "o_proj", "up_proj"}, 4)
	if err := Merge(m, a); err != nil {
		t.Fatal(err)
	}
	byName := map[string][]float32{}
	for _, tt := range a.Tensors {
		byName[tt.Name] = tt.Data
	}
	bt := base.Tensors()
	for i, mt := range m.Tensors() {
		path, _ := strings.CutSuffix(mt.Name, ".weight")
		var mod string
		var l int
		for ll := range c.NumHiddenLayers {
			for _, mm := range a.Config.TargetModules {
				if p, _ := ModulePath(ll, mm); p == path {
					mod, l = mm, ll
				}
			}
		}
		if mod == "" {
			if !slices.Equal(mt.Data, bt[i].Data) {
				t.Errorf("%s changed by a merge that does not target it", mt.Name)
			}
			continue
		}
		A, B := byName[TensorName(l, mod, false)], byName[TensorName(l, mod, true)]
		out, in := mt.Shape[0], mt.Shape[1]
		for o := range out {
			for j := range in {
				var d float64
				for k := range 3 {
					d += float64(B[o*3+k]) * float64(A[k*in+j])
				}
				want := float64(bt[i].Data[o*in+j]) + 2*d
				if got := float64(mt.Data[o*in+j]); math.Abs(got-want) > 1e-5*(1+math.Abs(want)) {
					t.Fatalf("%s[%d,%d] = %v, want %v", mt.Name, o, j, got, want)
				}
			}
		}
	}
	// A rank that does not match the base is refused before anything changes.
	other := gpu.TinyConfig()
	other.IntermediateSize = 96
	bad := randomAdapter(other, 3, 6, []string{"up_proj"}, 5)
	if err := Merge(m, bad); err == nil || !strings.Contains(err.Error(), "shape") {
		t.Errorf("Merge of an adapter for another intermediate size: %v", err)
	}
}

// TestFromLoRA: gpu's adapter names are PEFT's, and an adapter written
// from gpu.LoRA reads back into the same adapters.
func TestFromLoRA(t *testing.T) {
	c := gpu.TinyConfig()
	lo, err := gpu.NewLoRA(c, gpu.LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"k_proj", "gate_proj"}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := FromLoRA(lo, "/base")
	i := 0
	for l := range c.NumHiddenLayers {
		for _, m := range []string{"k_proj", "gate_proj"} {
			for _, b := range []bool{false, true} {
				if a.Tensors[i].Name != TensorName(l, m, b) {
					t.Fatalf("tensor %d is %s, want %s", i, a.Tensors[i].Name, TensorName(l, m, b))
				}
				i++
			}
		}
	}
	dir := t.TempDir()
	if err := Write(dir, a); err != nil {
		t.Fatal(err)
	}
	back, err := ReadFor(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	lo2, err := back.LoRA(c)
	if err != nil {
		t.Fatal(err)
	}
	if lo2.Scale() != 2 || !slices.Equal(lo2.Config().Targets, lo.Config().Targets) {
		t.Errorf("read back scale %v targets %v", lo2.Scale(), lo2.Config().Targets)
	}
	for i, x := range lo2.Tensors() {
		if !slices.Equal(x.Data, lo.Tensors()[i].Data) {
			t.Fatalf("%s differs after the round trip", x.Name)
		}
	}
}

// FuzzRead runs Read over arbitrary adapter_config.json and safetensors
// bytes: it must return an adapter that passes Check or an error, never
// panic or allocate what the file does not back.
func FuzzRead(f *testing.F) {
	cfg, weights := goodFiles(f, []string{"q_proj", "down_proj"})
	f.Add(cfg, weights)
	f.Add(setKey(f, cfg, "r", 1), weights)
	f.Add(cfg, safetensors(TensorName(0, "q_proj", false), []int{2, 64}))
	f.Add(cfg, safetensors(strings.Replace(TensorName(0, "q_proj", false), ".0.", ".999999999.", 1), []int{2, 64}))
	f.Add([]byte(`{"peft_type":"LORA","r":1,"lora_alpha":1,"target_modules":["q_proj"]}`), safetensors())
	f.Add([]byte(`null`), []byte{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '})
	f.Fuzz(func(t *testing.T, cfg, weights []byte) {
		a, err := Read(writeRaw(t, cfg, weights))
		if err != nil {
			return
		}
		if err := a.Check(nil); err != nil {
			t.Fatalf("Read returned an adapter that fails Check: %v", err)
		}
	})
}
