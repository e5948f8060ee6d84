package hf

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"swerl/gpu/arch"
)

func TestFloatConversionsMatchReference(t *testing.T) {
	data, err := os.ReadFile("testdata/float_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var rows [][3]uint32
	if err := json.Unmarshal(data, &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) < 1000 {
		t.Fatalf("only %d golden rows", len(rows))
	}
	bad := 0
	for _, r := range rows {
		f := math.Float32frombits(r[0])
		if got := Float32ToF16(f); uint32(got) != r[1] {
			bad++
			if bad < 5 {
				t.Errorf("Float32ToF16(%g = %#08x) = %#04x, want %#04x", f, r[0], got, r[1])
			}
		}
		if got := Float32ToBF16(f); uint32(got) != r[2] {
			bad++
			if bad < 5 {
				t.Errorf("Float32ToBF16(%g = %#08x) = %#04x, want %#04x", f, r[0], got, r[2])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d conversions differ from the reference", bad)
	}
}

func TestHalfWideningIsExact(t *testing.T) {
	for h := range 1 << 16 {
		f := F16ToFloat32(uint16(h))
		if math.IsNaN(float64(f)) {
			if h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
				t.Fatalf("F16ToFloat32(%#04x) = NaN", h)
			}
			if back := Float32ToF16(f); back&0x7c00 != 0x7c00 || back&0x3ff == 0 {
				t.Fatalf("NaN %#04x narrowed to %#04x", h, back)
			}
			continue
		}
		if back := Float32ToF16(f); back != uint16(h) {
			t.Fatalf("F16 %#04x -> %g -> %#04x", h, f, back)
		}
		if back := Float32ToBF16(BF16ToFloat32(uint16(h))); back != uint16(h) && !math.IsNaN(float64(BF16ToFloat32(uint16(h)))) {
			t.Fatalf("BF16 %#04x -> %#04x", h, back)
		}
	}
}

func TestReadReferenceFile(t *testing.T) {
	st, err := OpenSafetensors("testdata/reference.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.Metadata["source"] != "gen_safetensors.py" {
		t.Errorf("metadata = %v", st.Metadata)
	}
	tests := []struct {
		name  string
		dtype DType
		shape []int
		want  []float32
	}{
		{"a", F32, []int{2, 3}, []float32{0, 0.5, 1, 1.5, -2, 3.25}},
		{"b", F16, []int{5}, []float32{1, -2, 0.5, 65504, float32(math.Ldexp(1, -24))}},
		{"c", BF16, []int{3}, []float32{1, -3, 0.333984375}},
		{"scalar", F32, []int{}, []float32{7}},
	}
	for _, tt := range tests {
		info, ok := st.Info(tt.name)
		if !ok || info.DType != tt.dtype || !slices.Equal(info.Shape, tt.shape) {
			t.Errorf("Info(%s) = %+v, %v", tt.name, info, ok)
			continue
		}
		got, err := st.ReadFloat32(tt.name, nil)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ReadFloat32(%s) = %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
}

// filled is the tensor name of shape whose element i is f(i).
func filled(name string, shape []int, f func(i int) float32) Tensor {
	d := make([]float32, arch.Numel(shape))
	for i := range d {
		d[i] = f(i)
	}
	return Tensor{Name: name, Shape: shape, Data: d}
}

func testTensors() []Tensor {
	return []Tensor{
		filled("w", []int{3, 5}, func(i int) float32 { return float32(i)*0.25 - 1 }),
		filled("v", []int{7}, func(i int) float32 { return float32(math.Sin(float64(i))) }),
		filled("empty", []int{0, 4}, nil),
	}
}

func TestWriteReadAllDTypes(t *testing.T) {
	for _, dt := range []DType{F32, F16, BF16} {
		t.Run(string(dt), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "x.safetensors")
			in := testTensors()
			if err := WriteSafetensors(p, in, dt, map[string]string{"k": "v"}); err != nil {
				t.Fatal(err)
			}
			raw, _ := os.ReadFile(p)
			if n := binary.LittleEndian.Uint64(raw); n%8 != 0 {
				t.Errorf("header length %d is not a multiple of 8", n)
			}
			st, err := OpenSafetensors(p)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if st.Metadata["format"] != "pt" || st.Metadata["k"] != "v" {
				t.Errorf("metadata = %v", st.Metadata)
			}
			for _, w := range in {
				got, err := st.ReadFloat32(w.Name, nil)
				if err != nil {
					t.Fatal(err)
				}
				for i, v := range w.Data {
					want := v
					switch dt {
					case F16:
						want = F16ToFloat32(Float32ToF16(v))
					case BF16:
						want = BF16ToFloat32(Float32ToBF16(v))
					}
					if got[i] != want {
						t.Fatalf("%s[%d] = %v, want %v", w.Name, i, got[i], want)
					}
				}
			}
		})
	}
}

// corrupt builds a safetensors file from a header and data length.
func corrupt(header string, data int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, data)...)
}

func TestOpenRejectsBadFiles(t *testing.T) {
	good := corrupt(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8)
	huge := binary.LittleEndian.AppendUint64(nil, 1<<40)
	tests := []struct {
		name    string
		data    []byte
		wantErr string
	}{
		{"short", []byte{1, 2, 3}, "too short"},
		{"header past end", huge, "exceeds the file"},
		{"not json", corrupt(`{"a":`, 0), "not a JSON object"},
		{"bad dtype", corrupt(`{"a":{"dtype":"I8","shape":[2],"data_offsets":[0,2]}}`, 2), "unsupported dtype"},
		{"shape mismatch", corrupt(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8), "needs 12 bytes"},
		{"negative shape", corrupt(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, 8), "invalid shape"},
		{"reversed offsets", corrupt(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, 8), "invalid data_offsets"},
		{"truncated data", good[:len(good)-1], "truncated"},
		{"offsets past the end", corrupt(`{"a":{"dtype":"F32","shape":[268435456],"data_offsets":[0,1073741824]}}`, 8), "past the 8 byte data section"},
		{"huge shape", corrupt(`{"a":{"dtype":"F32","shape":[2147483647,2147483647,2147483647],"data_offsets":[0,8]}}`, 8), "needs"},
		{"shape overflow", corrupt(`{"a":{"dtype":"F32","shape":[4294967296],"data_offsets":[0,8]}}`, 8), "invalid shape"},
		{"trailing data", append(append([]byte(nil), good...), 0), "truncated or padded"},
		{"hole", corrupt(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8), "overlap or hole"},
		{"overlap", corrupt(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8), "overlap or hole"},
		{"bad metadata", corrupt(`{"__metadata__":{"a":1}}`, 0), "__metadata__"},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".safetensors")
			if err := os.WriteFile(p, tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := OpenSafetensors(p)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), p) {
				t.Errorf("OpenSafetensors error = %v, want it to name %s and contain %q", err, p, tt.wantErr)
			}
		})
	}
	if _, err := parseSafetensors(bytesReaderAt(good), int64(len(good))); err != nil {
		t.Errorf("good file rejected: %v", err)
	}
}

type bytesReaderAt []byte

func (b bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(b)) {
		return 0, os.ErrInvalid
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, os.ErrClosed
	}
	return n, nil
}

func FuzzSafetensorsHeader(f *testing.F) {
	f.Add(corrupt(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8))
	f.Add(corrupt(`{"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[1,1],"data_offsets":[0,2]}}`, 2))
	f.Add(corrupt(`{"a":{"dtype":"F32","shape":[268435456],"data_offsets":[0,1073741824]}}`, 8))
	f.Add(corrupt(`{"a":{"dtype":"F16","shape":[2147483647,2147483647,2],"data_offsets":[0,8]}}`, 8))
	if ref, err := os.ReadFile("testdata/reference.safetensors"); err == nil {
		f.Add(ref)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := parseSafetensors(bytesReaderAt(data), int64(len(data)))
		if err != nil {
			return
		}
		// Every accepted tensor lies inside the file and reads whole,
		// with no more elements than its bytes can hold.
		for _, ti := range st.Tensors() {
			if st.dataOff+ti.End > int64(len(data)) {
				t.Fatalf("tensor %q ends at %d past the file (%d bytes)", ti.Name, st.dataOff+ti.End, len(data))
			}
			got, err := st.ReadFloat32(ti.Name, nil)
			if err != nil {
				t.Fatalf("accepted tensor %q does not read: %v", ti.Name, err)
			}
			if int64(len(got)*ti.DType.Size()) != ti.End-ti.Begin {
				t.Fatalf("tensor %q: %d elements from %d bytes", ti.Name, len(got), ti.End-ti.Begin)
			}
		}
	})
}

func tinyArch() arch.Config {
	return arch.Config{ModelType: "qwen2", HiddenSize: 8, IntermediateSize: 12, NumHiddenLayers: 2,
		NumAttentionHeads: 4, NumKeyValueHeads: 2, VocabSize: 11, TieWordEmbeddings: true, AttentionBias: true}
}

func archTensors(a arch.Config) []Tensor {
	var out []Tensor
	for i, s := range a.Tensors() {
		out = append(out, filled(s.Name, s.Shape, func(j int) float32 { return float32(i) + float32(j)/64 }))
	}
	return out
}

func TestArchTensorsQwen2(t *testing.T) {
	a := tinyArch()
	specs := a.Tensors()
	// 1 embedding + 2 layers × 12 (2 norms, 4 attention weights, 3 biases, 3 MLP) + final norm.
	if len(specs) != 1+2*12+1 {
		t.Fatalf("%d tensors, want 26", len(specs))
	}
	want := map[string][]int{
		"model.embed_tokens.weight":              {11, 8},
		"model.layers.1.self_attn.k_proj.weight": {4, 8}, // 2 kv heads × head_dim 2
		"model.layers.1.self_attn.k_proj.bias":   {4},
		"model.layers.0.self_attn.o_proj.weight": {8, 8},
		"model.layers.0.mlp.down_proj.weight":    {8, 12},
		"model.norm.weight":                      {8},
	}
	for _, s := range specs {
		if w, ok := want[s.Name]; ok && !slices.Equal(w, s.Shape) {
			t.Errorf("%s shape %v, want %v", s.Name, s.Shape, w)
		}
		delete(want, s.Name)
		if s.Name == "lm_head.weight" {
			t.Error("lm_head.weight with tied embeddings")
		}
	}
	if len(want) > 0 {
		t.Errorf("missing %v", want)
	}
	a.TieWordEmbeddings = false
	if l := a.Tensors(); l[len(l)-1].Name != "lm_head.weight" {
		t.Error("no lm_head.weight without tied embeddings")
	}
}

func TestSaveLoadSingleAndSharded(t *testing.T) {
	a := tinyArch()
	in := archTensors(a)
	for _, opt := range []SaveOptions{{}, {DType: BF16}, {DType: F16, MaxShardBytes: 300}} {
		t.Run(string(opt.dtype())+map[bool]string{true: "-sharded"}[opt.MaxShardBytes > 0], func(t *testing.T) {
			dir := t.TempDir()
			files, err := Save(dir, a, in, opt)
			if err != nil {
				t.Fatal(err)
			}
			sharded := slices.Contains(files, WeightsIndexFile)
			if sharded != (opt.MaxShardBytes > 0) || (sharded && len(files) < 4) {
				t.Fatalf("files %v", files)
			}
			cfg := map[string]any{}
			cj, _ := os.ReadFile(filepath.Join(dir, ConfigFile))
			if err := json.Unmarshal(cj, &cfg); err != nil {
				t.Fatal(err)
			}
			if cfg["torch_dtype"] != opt.dtype().TorchName() || cfg["model_type"] != "qwen2" ||
				!slices.Equal(toStrings(cfg["architectures"]), []string{"Qwen2ForCausalLM"}) {
				t.Errorf("config.json = %s", cj)
			}
			m, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if m.DType != opt.dtype() || len(m.Tensors) != len(in) {
				t.Fatalf("loaded dtype %s, %d tensors", m.DType, len(m.Tensors))
			}
			for i, w := range in {
				g := m.Tensors[i]
				if g.Name != w.Name || !slices.Equal(g.Shape, w.Shape) {
					t.Fatalf("tensor %d: %s %v, want %s %v", i, g.Name, g.Shape, w.Name, w.Shape)
				}
				for j := range w.Data {
					if d := math.Abs(float64(g.Data[j] - w.Data[j])); d > math.Abs(float64(w.Data[j]))/128 {
						t.Fatalf("%s[%d] = %v, want %v", w.Name, j, g.Data[j], w.Data[j])
					}
				}
			}
		})
	}
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func TestLoadReportsMismatches(t *testing.T) {
	a := tinyArch()
	in := archTensors(a)
	in[1].Shape = []int{4, 2} // input_layernorm of layer 0 reshaped
	in = append(in[:3], in[4:]...)
	in = append(in, Tensor{Name: "extra", Shape: []int{1}, Data: []float32{1}})
	dir := t.TempDir()
	if _, err := Save(dir, a, in, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir)
	for _, want := range []string{"model.layers.0.input_layernorm.weight has shape [4 2], want [8]", "missing model.layers.0.self_attn.q_proj.bias", "unexpected extra"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load error = %v, want it to contain %q", err, want)
		}
	}
}

func TestLoadShardIndexErrors(t *testing.T) {
	a := tinyArch()
	dir := t.TempDir()
	if _, err := Save(dir, a, archTensors(a), SaveOptions{MaxShardBytes: 300}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "model-00002-of-00003.safetensors")); err != nil {
		// the shard count depends on sizes; find any second shard
		files, _ := filepath.Glob(filepath.Join(dir, "model-00002-of-*.safetensors"))
		if len(files) == 0 {
			t.Fatalf("no second shard: %v", err)
		}
		os.Remove(files[0])
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "model-00002-of-") {
		t.Errorf("Load with a missing shard: %v", err)
	}
	empty := t.TempDir()
	os.WriteFile(filepath.Join(empty, ConfigFile), []byte(`{"model_type":"llama","hidden_size":8,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":2,"vocab_size":4}`), 0o644)
	if _, err := Load(empty); err == nil || !strings.Contains(err.Error(), "no model.safetensors") {
		t.Errorf("Load without weights: %v", err)
	}
}

func TestConfigJSON(t *testing.T) {
	if _, err := ConfigJSON(map[string]any{"model_type": "gpt2"}, F32); err == nil {
		t.Error("gpt2 accepted")
	}
	b, err := ConfigJSON(map[string]any{"model_type": "llama", "architectures": []string{"X"}, "hidden_act": "gelu"}, BF16)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	if m["torch_dtype"] != "bfloat16" || m["hidden_act"] != "gelu" || toStrings(m["architectures"])[0] != "X" || m["use_cache"] != true {
		t.Errorf("ConfigJSON = %s", b)
	}
	if _, err := ParseArch([]byte(`{"model_type":"qwen2","hidden_size":6,"intermediate_size":1,"num_hidden_layers":1,"num_attention_heads":4,"vocab_size":1}`)); err == nil || !strings.Contains(err.Error(), "hidden_size 6") {
		t.Errorf("ParseArch: %v", err)
	}
}

// tinyFiles writes the tiny architecture's weights and returns them with
// its config.json.
func tinyFiles(t testing.TB) (configJSON, weights []byte) {
	dir := t.TempDir()
	a := tinyArch()
	if _, err := Save(dir, a, archTensors(a), SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	cj, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	w, err := os.ReadFile(filepath.Join(dir, WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	return cj, w
}

// setKey returns config.json with one key set to a raw JSON value.
func setKey(t testing.TB, cj []byte, key, value string) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(cj, &m); err != nil {
		t.Fatal(err)
	}
	m[key] = json.RawMessage(value)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeDir(t testing.TB, cj, weights []byte) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), cj, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, WeightsFile), weights, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A config.json claiming a huge model next to small weights is refused
// naming the file and the field, before the tensor list it describes is
// built (the list of a billion layers ran out of memory).
func TestLoadRejectsHugeConfig(t *testing.T) {
	cj, w := tinyFiles(t)
	for _, tc := range []struct{ key, value string }{
		{"num_hidden_layers", "1000000000"},
		{"vocab_size", "1000000000000"},
		{"intermediate_size", "4611686018427387904"},
		{"head_dim", "-2"},
	} {
		dir := writeDir(t, setKey(t, cj, tc.key, tc.value), w)
		_, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), filepath.Join(dir, ConfigFile)) {
			t.Errorf("%s %s: Load error = %v, want it to name %s and the field", tc.key, tc.value, err, filepath.Join(dir, ConfigFile))
		}
	}
	big := writeDir(t, append(cj[:len(cj):len(cj)], make([]byte, maxConfigBytes)...), w)
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load with a %d byte config.json: %v", maxConfigBytes+len(cj), err)
	}
}

// FuzzOpenDir: any config.json beside fixed weights either fails to open
// with an error or opens to tensors that all read.
func FuzzOpenDir(f *testing.F) {
	cj, w := tinyFiles(f)
	f.Add(cj)
	f.Add(setKey(f, cj, "num_hidden_layers", "1000000000"))
	f.Add(setKey(f, cj, "vocab_size", "1000000000000"))
	f.Add(setKey(f, cj, "num_key_value_heads", "0"))
	f.Add(setKey(f, cj, "tie_word_embeddings", "false"))
	// One directory for the worker process (its inputs run one at a
	// time): only config.json changes between them.
	dir := writeDir(f, cj, w)
	f.Fuzz(func(t *testing.T, cj []byte) {
		if err := os.WriteFile(filepath.Join(dir, ConfigFile), cj, 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := Open(dir)
		if err != nil {
			return
		}
		defer d.Close()
		if err := d.Config.ValidateShape(); err != nil {
			t.Fatalf("Open accepted a config that ValidateShape refuses: %v", err)
		}
		var ts []Tensor
		for _, s := range d.Config.Tensors() {
			ts = append(ts, Tensor{Name: s.Name, Shape: s.Shape, Data: make([]float32, arch.Numel(s.Shape))})
		}
		if err := d.ReadInto(ts); err != nil {
			t.Fatalf("opened directory does not read: %v", err)
		}
	})
}
