package gguf

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"swerl/gpu/hf"
	"swerl/gpu/modeldir"
)

func readF32(t *testing.T, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// TestDequantizeMatchesGGUFPy decodes random blocks of every supported
// type and compares them with gguf-py's dequantization of the same bytes
// (testdata/gen_vectors.py), bit for bit.
func TestDequantizeMatchesGGUFPy(t *testing.T) {
	for _, ty := range []Type{F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K} {
		t.Run(ty.String(), func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("testdata", "dequant", ty.String()+".bin"))
			if err != nil {
				t.Fatal(err)
			}
			want := readF32(t, filepath.Join("testdata", "dequant", ty.String()+".f32"))
			got := make([]float32, len(want))
			if err := Dequantize(ty, got, src); err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					if bad < 5 {
						t.Errorf("element %d: %g, gguf-py %g", i, got[i], want[i])
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d elements differ", bad, len(want))
			}
		})
	}
}

// TestImportTiny imports a two-layer Llama written by gguf-py and checks
// the q and k projections against transformers' un-permutation, the
// other tensors against the file, and that the directory loads.
func TestImportTiny(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	sum, err := Import(filepath.Join("testdata", "tiny.gguf"), dir, hf.F32)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Config.NumHiddenLayers != 2 || sum.Config.KVHeads() != 2 || !sum.Config.TieWordEmbeddings {
		t.Fatalf("config %+v", sum.Config)
	}
	m, err := hf.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string][]float32{}
	for _, tn := range m.Tensors {
		byName[tn.Name] = tn.Data
	}
	for name, ref := range map[string]string{
		"model.layers.0.self_attn.q_proj.weight": "tiny.q_proj.f32",
		"model.layers.0.self_attn.k_proj.weight": "tiny.k_proj.f32",
	} {
		want := readF32(t, filepath.Join("testdata", ref))
		got := byName[name]
		if len(got) != len(want) {
			t.Fatalf("%s: %d elements, want %d", name, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s[%d] = %g, transformers' reverse_permute gives %g", name, i, got[i], want[i])
			}
		}
	}
	p, err := modeldir.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ids := p.Tokenizer.Encode("hello<|im_end|>"); len(ids) != 4 || ids[0] != 259 || ids[3] != 1 {
		t.Errorf("hello<|im_end|> encodes as %v, want [259 (hel) l o 1]", ids)
	}
	if len(p.Stop) != 1 || p.Stop[0] != 1 {
		t.Errorf("stop tokens %v, want [1]", p.Stop)
	}
	if _, err := Import(filepath.Join("testdata", "tiny.gguf"), dir, hf.F32); err == nil || !strings.Contains(err.Error(), "already holds a model") {
		t.Errorf("importing over a model: %v", err)
	}
}

// ggufBytes builds a GGUF file by hand for the error tests.
type ggufBytes struct{ bytes.Buffer }

func (b *ggufBytes) u32(v uint32) { binary.Write(b, binary.LittleEndian, v) }
func (b *ggufBytes) u64(v uint64) { binary.Write(b, binary.LittleEndian, v) }
func (b *ggufBytes) str(s string) { b.u64(uint64(len(s))); b.WriteString(s) }

func header(nt, nkv uint64) *ggufBytes {
	b := &ggufBytes{}
	b.WriteString(Magic)
	b.u32(3)
	b.u64(nt)
	b.u64(nkv)
	return b
}

func parseBytes(b []byte) error {
	_, err := parse(bytes.NewReader(b), int64(len(b)))
	return err
}

func TestOpenRejects(t *testing.T) {
	cases := map[string]struct {
		file []byte
		want string
	}{
		"magic": {[]byte("GGML\x03\x00\x00\x00"), "not a GGUF file"},
		"version": {func() []byte {
			b := &ggufBytes{}
			b.WriteString(Magic)
			b.u32(1)
			return b.Bytes()
		}(), "version 1"},
		"tensor count": {header(1<<60, 0).Bytes(), "tensor count"},
		"kv count":     {header(0, 1<<60).Bytes(), "metadata count"},
		"string length": {func() []byte {
			b := header(0, 1)
			b.u64(1 << 60)
			b.Write(make([]byte, 64))
			return b.Bytes()
		}(), "past the end"},
		"array length": {func() []byte {
			b := header(0, 1)
			b.str("a")
			b.u32(uint32(TypeArray))
			b.u32(uint32(TypeUint64))
			b.u64(1 << 60)
			return b.Bytes()
		}(), "cannot fit"},
		"value type": {func() []byte {
			b := header(0, 1)
			b.str("a")
			b.u32(99)
			return b.Bytes()
		}(), "unknown value type"},
		"tensor past end": {func() []byte {
			b := header(1, 0)
			b.str("w")
			b.u32(1)
			b.u64(1 << 20)
			b.u32(uint32(F32))
			b.u64(0)
			return b.Bytes()
		}(), "past the end"},
		"tensor type": {func() []byte {
			b := header(1, 0)
			b.str("w")
			b.u32(1)
			b.u64(32)
			b.u32(77)
			b.u64(0)
			return b.Bytes()
		}(), "tensor w: type type(77) is not supported"},
		"huge dims": {func() []byte {
			b := header(1, 0)
			b.str("w")
			b.u32(2)
			b.u64(1 << 30)
			b.u64(1 << 30)
			return b.Bytes()
		}(), "over 2^40"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := parseBytes(c.file)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestImportNamesWhatItCannotConvert: an architecture or a tensor type
// swerl does not read is an error naming the key or the tensor.
func TestImportNamesWhatItCannotConvert(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "tiny.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	arch := bytes.Replace(data, []byte("\x05\x00\x00\x00\x00\x00\x00\x00llama"), []byte("\x05\x00\x00\x00\x00\x00\x00\x00gemma"), 1)
	p := filepath.Join(t.TempDir(), "gemma.gguf")
	os.WriteFile(p, arch, 0o644)
	if _, err := Import(p, filepath.Join(t.TempDir(), "out"), hf.F32); err == nil || !strings.Contains(err.Error(), `general.architecture "gemma"`) {
		t.Errorf("gemma: %v", err)
	}
	g, err := Open(filepath.Join("testdata", "tiny.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ti := g.Tensors[0]
	ti.Type = Q2_K
	if _, err := g.Float32(ti, nil); err == nil || !strings.Contains(err.Error(), "tensor "+ti.Name+" has type Q2_K") {
		t.Errorf("Q2_K: %v", err)
	}
}

// FuzzOpen: any bytes give a File or an error, never a panic, and memory
// stays bounded by the input (counts and lengths are checked against it).
func FuzzOpen(f *testing.F) {
	tiny, err := os.ReadFile(filepath.Join("testdata", "tiny.gguf"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tiny[:4096])
	f.Add(header(0, 0).Bytes())
	b := header(1, 1)
	b.str("general.alignment")
	b.u32(uint32(TypeUint32))
	b.u32(64)
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := parse(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		for _, ti := range g.Tensors {
			if ti.Offset+ti.Size > int64(len(data)) {
				t.Fatalf("tensor %s runs past the input", ti.Name)
			}
		}
		g.Config()
	})
}
