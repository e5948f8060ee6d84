package modeldir

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"swerl/gpu"
	"swerl/gpu/hf"
	"swerl/gpu/tokenizer"
	"swerl/schemas"
	"swerl/sinks/checkpoint"
)

func TestInitLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	files, err := Init(dir, "tiny", 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("Init reported %s but: %v", f, err)
		}
	}
	p, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := BuiltinConfig("tiny")
	want, err := gpu.NewModel(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	got := p.Model.Tensors()
	for i, w := range want.Tensors() {
		if got[i].Name != w.Name || !slices.Equal(got[i].Data, w.Data) {
			t.Fatalf("tensor %s differs after init → load", w.Name)
		}
	}
	if p.Model.Config.MaxPositionEmbeddings != 4096 || p.Model.Config.VocabSize != cfg.VocabSize {
		t.Errorf("config %+v", p.Model.Config)
	}
	// The tokenizer must encode exactly as the built-in one.
	ref := tokenizer.Builtin()
	text := "def f(self):\n    return self.x  # héllo <|im_end|>"
	if a, b := p.Tokenizer.Encode(text), ref.Encode(text); !slices.Equal(a, b) {
		t.Errorf("loaded tokenizer encodes %v, built-in %v", a, b)
	}
	imEnd, _ := ref.TokenID(tokenizer.IMEnd)
	if !slices.Contains(p.Stop, imEnd) {
		t.Errorf("stop tokens %v lack <|im_end|> %d", p.Stop, imEnd)
	}
	s, err := p.Tokenizer.Chat.Render([]tokenizer.Message{{Role: "user", Content: "hi"}}, true)
	if err != nil || !strings.HasSuffix(s, "<|im_start|>assistant\n") {
		t.Errorf("chat template renders %q, %v", s, err)
	}
	// Another seed gives other weights.
	if _, err := Init(filepath.Join(dir, "b"), "tiny", 8); err != nil {
		t.Fatal(err)
	}
	q, err := Load(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(q.Model.Tensors()[0].Data, got[0].Data) {
		t.Error("seeds 7 and 8 gave equal embeddings")
	}
}

func TestInitUnknownConfig(t *testing.T) {
	if _, err := Init(t.TempDir(), "huge", 1); err == nil || !strings.Contains(err.Error(), "tiny") {
		t.Fatalf("err = %v, want a list of known configs", err)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); err == nil {
		t.Fatal("empty directory loaded")
	}
	if _, err := Init(dir, "tiny", 1); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Fatalf("err = %v, want one naming tokenizer.json", err)
	}
}

func TestResolveOutputRoot(t *testing.T) {
	root := t.TempDir()
	var logBuf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	st, err := checkpoint.Open(checkpoint.Config{Dir: root, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(0); v < 2; v++ {
		if _, err := st.Publish(schemas.WeightVersion{Version: v, Step: v * 10}, func(dir string) error {
			_, err := Init(dir, "tiny", uint64(v))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := Open(root, log)
	if err != nil {
		t.Fatal(err)
	}
	if p.Version != 1 || p.Step != 10 {
		t.Fatalf("resolved version %d step %d, want 1 and 10", p.Version, p.Step)
	}
	// Corrupt v1: Open falls back to v0 and says why.
	if err := os.WriteFile(filepath.Join(st.Path(1), "config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err = Open(root, log)
	if err != nil {
		t.Fatal(err)
	}
	if p.Version != 0 {
		t.Fatalf("resolved version %d after corrupting v1, want 0", p.Version)
	}
	if !strings.Contains(logBuf.String(), "config.json") {
		t.Errorf("no warning naming the corrupt file: %s", logBuf.String())
	}
	if _, err := Open(t.TempDir(), log); err == nil {
		t.Error("an empty directory resolved")
	}
}

// TestWriteCheckpointTiedHead: with tiedHead, a checkpoint of a model with
// tied embeddings (the tiny one) holds lm_head.weight equal to the
// embeddings, what an engine reloading in place needs, and loads back to
// the same model; without it the file holds exactly the model's tensors.
func TestWriteCheckpointTiedHead(t *testing.T) {
	src := t.TempDir()
	if _, err := Init(src, "tiny", 3); err != nil {
		t.Fatal(err)
	}
	p0, err := Load(src)
	if err != nil {
		t.Fatal(err)
	}
	m := p0.Model
	if !m.Config.TieWordEmbeddings {
		t.Fatal("the tiny model's embeddings are not tied: the test needs a tied model")
	}
	for _, head := range []bool{true, false} {
		dir := filepath.Join(t.TempDir(), "v1")
		if _, err := WriteCheckpoint(dir, src, m, head); err != nil {
			t.Fatal(err)
		}
		st, err := hf.OpenSafetensors(filepath.Join(dir, hf.WeightsFile))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, ti := range st.Tensors() {
			names = append(names, ti.Name)
		}
		if has := slices.Contains(names, "lm_head.weight"); has != head {
			t.Errorf("tiedHead=%v: lm_head.weight written %v", head, has)
		}
		if len(names) != len(m.Tensors())+map[bool]int{true: 1}[head] {
			t.Errorf("tiedHead=%v: %d tensors written, the model has %d", head, len(names), len(m.Tensors()))
		}
		if head {
			h, err := st.ReadFloat32("lm_head.weight", nil)
			if err != nil {
				t.Fatal(err)
			}
			e, err := st.ReadFloat32("model.embed_tokens.weight", nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(h, e) {
				t.Errorf("lm_head.weight differs from the embeddings")
			}
		}
		st.Close()
		p, err := Load(dir)
		if err != nil {
			t.Fatalf("tiedHead=%v: %v", head, err)
		}
		for i, w := range m.Tensors() {
			if g := p.Model.Tensors()[i]; g.Name != w.Name || !slices.Equal(g.Data, w.Data) {
				t.Fatalf("tiedHead=%v: %s loads back different", head, w.Name)
			}
		}
	}
}
