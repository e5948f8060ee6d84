// Package modeldir loads and saves a policy directory in the Hugging Face
// layout swerl uses everywhere a model is named on the command line:
// config.json, model.safetensors (or shards with their index),
// tokenizer.json and tokenizer_config.json with the chat template.
//
// It also resolves output roots: a directory holding checkpoints/ and
// index.parquet (sinks/checkpoint) names its newest checkpoint whose
// hashes verify. Init writes the built-in models (a configuration and
// byte-level tokenizer made in code, random weights from a seed), so
// everything runs without downloads.
//
// A directory may also be a PEFT LoRA adapter (adapter_config.json and
// adapter_model.safetensors, package swerl/gpu/peft), as the versions of
// a LoRA run are: Load then loads the base model its
// base_model_name_or_path names and merges the adapter into it.
package modeldir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"swerl/gpu"
	"swerl/gpu/hf"
	"swerl/gpu/peft"
	"swerl/gpu/tokenizer"
	"swerl/sinks/checkpoint"
)

// Builtin configurations accepted by Init (--config).
// ErrNoLocalBase is the error of an adapter whose base model is not a
// local model directory (a hub id, or a folder gone): it cannot be loaded
// as a model until it is merged into a copy of its base.
var ErrNoLocalBase = errors.New("not a model directory with config.json; merge the adapter into a local copy of its base first")

var builtins = map[string]func() gpu.Config{
	// tiny: gpu.TinyConfig with a 4096-token context, so that real SWE-RL
	// prompts fit; about 0.1M parameters.
	"tiny": func() gpu.Config {
		c := gpu.TinyConfig()
		c.MaxPositionEmbeddings = 4096
		return c
	},
	// small: about 3M parameters, the same family and vocabulary.
	"small": func() gpu.Config {
		c := gpu.TinyConfig()
		c.HiddenSize = 256
		c.IntermediateSize = 704
		c.NumHiddenLayers = 4
		c.NumAttentionHeads = 8
		c.NumKeyValueHeads = 4
		c.MaxPositionEmbeddings = 4096
		return c
	},
	// The Qwen2.5 Instruct models' exact shapes (their config.json on the
	// Hugging Face hub), random weights: every command runs at real size
	// without a download.
	"qwen2.5-0.5b": func() gpu.Config { return qwen25(896, 4864, 24, 14, 2, 151936, true) },
	"qwen2.5-1.5b": func() gpu.Config { return qwen25(1536, 8960, 28, 12, 2, 151936, true) },
	"qwen2.5-7b":   func() gpu.Config { return qwen25(3584, 18944, 28, 28, 4, 152064, false) },
}

func qwen25(hidden, inter, layers, heads, kv, vocab int, tied bool) gpu.Config {
	return gpu.Config{ModelType: "qwen2", HiddenSize: hidden, IntermediateSize: inter, NumHiddenLayers: layers,
		NumAttentionHeads: heads, NumKeyValueHeads: kv, VocabSize: vocab, MaxPositionEmbeddings: 32768,
		RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: tied, AttentionBias: true}
}

// realShape reports whether a built-in configuration is a real model's
// shape: its vocabulary is the model's (the tokenizer is sized to it) and
// its weights are written as the hub ships them (bf16, in shards).
func realShape(name string) bool { return strings.HasPrefix(name, "qwen") }

// BuiltinNames lists the configurations Init accepts, sorted.
func BuiltinNames() []string {
	var out []string
	for n := range builtins {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// BuiltinConfig returns the named built-in configuration with the token
// ids of the built-in tokenizer filled in.
func BuiltinConfig(name string) (gpu.Config, error) {
	mk := builtins[name]
	if mk == nil {
		return gpu.Config{}, fmt.Errorf("modeldir: unknown built-in config %q (have %s)", name, strings.Join(BuiltinNames(), ", "))
	}
	c := mk()
	tok := tokenizer.Builtin()
	if realShape(name) {
		// The tokenizer is sized to the model's vocabulary instead.
		var err error
		if tok, err = tokenizer.BuiltinSized(c.VocabSize); err != nil {
			return gpu.Config{}, err
		}
	}
	// The vocabulary is exactly the tokenizer's, so that every id the
	// model can sample decodes.
	c.VocabSize = tok.VocabSize()
	eos, _ := tok.TokenID(tokenizer.IMEnd)
	bos, _ := tok.TokenID(tokenizer.EndOfText)
	c.EosTokenID = int(eos)
	c.BosTokenID = int(bos)
	return c, nil
}

// Policy is a loaded policy directory.
type Policy struct {
	Dir       string
	Model     *gpu.Model
	Tokenizer *tokenizer.Tokenizer
	// Stop are the token ids that end a completion: the tokenizer's eos
	// token and config.json's eos_token_id(s), deduplicated.
	Stop []int32
	// Version is the checkpoint version when the directory was resolved
	// from an output root, else -1.
	Version int64
	// Step is the optimizer step of that checkpoint (0 otherwise).
	Step int64
}

// Init writes the named built-in model (tiny or small) with weights drawn
// from seed into dir, which is created. It returns the files written.
func Init(dir, config string, seed uint64) ([]string, error) {
	cfg, err := BuiltinConfig(config)
	if err != nil {
		return nil, err
	}
	m, err := gpu.NewModel(cfg, seed)
	if err != nil {
		return nil, err
	}
	if !realShape(config) {
		return Save(dir, m, tokenizer.Builtin(), tokenizer.BuiltinConfig)
	}
	tok, err := tokenizer.BuiltinSized(cfg.VocabSize)
	if err != nil {
		return nil, err
	}
	tcfg := tokenizer.BuiltinConfig
	tcfg.ModelMaxLength = cfg.MaxPositionEmbeddings
	// bf16 in shards of at most 4 GB, as the hub ships these models.
	return save(dir, m, tok, tcfg, hf.SaveOptions{DType: hf.BF16, MaxShardBytes: 4 << 30})
}

// Save writes m and tok into dir in the Hugging Face layout (F32
// safetensors) and returns the names of the files written.
func Save(dir string, m *gpu.Model, tok *tokenizer.Tokenizer, tcfg tokenizer.Config) ([]string, error) {
	return save(dir, m, tok, tcfg, hf.SaveOptions{})
}

func save(dir string, m *gpu.Model, tok *tokenizer.Tokenizer, tcfg tokenizer.Config, opts hf.SaveOptions) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("modeldir: %w", err)
	}
	files, err := hf.Save(dir, m.Config, m.Tensors(), opts)
	if err != nil {
		return nil, err
	}
	if err := tok.WriteDir(dir, tcfg); err != nil {
		return nil, err
	}
	return append(files, "tokenizer.json", "tokenizer_config.json"), nil
}

// Load reads a policy directory: the model converted to float32 and the
// tokenizer with its chat template. config.json is checked (dimensions and
// total size within bounds) before anything it sizes is allocated, and a
// NaN or infinite weight is an error naming its tensor (a
// *gpu.NonFiniteError). An adapter directory (IsAdapter) loads as its base
// model (AdapterBase) with the adapter merged, the merged weights checked
// the same way; the tokenizer is the base's.
func Load(dir string) (*Policy, error) {
	if IsAdapter(dir) {
		return loadAdapter(dir)
	}
	hd, err := hf.Open(dir)
	if err != nil {
		return nil, err
	}
	defer hd.Close()
	cfg := hd.Config
	m, err := gpu.NewZeroModel(cfg)
	if err != nil {
		return nil, fmt.Errorf("modeldir: %s: %w", filepath.Join(dir, hf.ConfigFile), err)
	}
	// The model's tensor list is the one hf.Open checked the files
	// against, so the weights are read straight into the arena.
	if err := hd.ReadInto(m.Tensors()); err != nil {
		return nil, err
	}
	// A NaN or infinite weight makes every logit NaN: such weights are
	// refused here, before anything serves, trains on or merges them.
	if err := m.CheckFinite(); err != nil {
		return nil, fmt.Errorf("modeldir: %s: %w", dir, err)
	}
	tok, err := tokenizer.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	if tok.VocabSize() > cfg.VocabSize {
		return nil, fmt.Errorf("modeldir: %s: tokenizer has %d ids, more than vocab_size %d", dir, tok.VocabSize(), cfg.VocabSize)
	}
	if tok.Chat == nil {
		return nil, fmt.Errorf("modeldir: %s: tokenizer_config.json has no chat_template", dir)
	}
	stop, err := stopTokens(dir, cfg, tok)
	if err != nil {
		return nil, err
	}
	return &Policy{Dir: dir, Model: m, Tokenizer: tok, Stop: stop, Version: -1}, nil
}

// stopTokens collects eos ids from config.json and tokenizer_config.json.
func stopTokens(dir string, cfg gpu.Config, tok *tokenizer.Tokenizer) ([]int32, error) {
	seen := map[int32]bool{}
	var out []int32
	add := func(id int32) {
		if id >= 0 && int(id) < cfg.VocabSize && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	switch v := cfg.EosTokenID.(type) {
	case float64:
		add(int32(v))
	case int:
		add(int32(v))
	case []any:
		for _, x := range v {
			if f, ok := x.(float64); ok {
				add(int32(f))
			}
		}
	}
	p := filepath.Join(dir, "tokenizer_config.json")
	data, err := os.ReadFile(p)
	if err == nil {
		var tc struct {
			EOS json.RawMessage `json:"eos_token"`
		}
		if err := json.Unmarshal(data, &tc); err != nil {
			return nil, fmt.Errorf("modeldir: parse %s: %w", p, err)
		}
		var s string
		var obj struct{ Content string }
		if json.Unmarshal(tc.EOS, &s) != nil && json.Unmarshal(tc.EOS, &obj) == nil {
			s = obj.Content
		}
		if id, ok := tok.TokenID(s); ok && s != "" {
			add(id)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("modeldir: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("modeldir: %s: no end-of-sequence token (eos_token_id in config.json or eos_token in tokenizer_config.json)", dir)
	}
	return out, nil
}

// IsAdapter reports whether dir is a PEFT adapter directory: it has
// adapter_config.json and no config.json.
func IsAdapter(dir string) bool { return hasInsteadOfConfig(dir, peft.ConfigFile) }

// hasInsteadOfConfig reports whether dir has the file name and no
// config.json, which would make it a model directory whatever else it
// holds.
func hasInsteadOfConfig(dir, name string) bool {
	if _, err := os.Stat(filepath.Join(dir, hf.ConfigFile)); err == nil {
		return false
	}
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}

// AdapterBase returns the base model directory of the adapter in dir: its
// base_model_name_or_path, resolved against dir when relative. It must be
// a model directory (config.json), not an output root or another adapter:
// a hub name cannot be loaded here.
func AdapterBase(dir string) (string, error) {
	c, err := peft.ReadConfig(dir)
	if err != nil {
		return "", err
	}
	base := c.BaseModelNameOrPath
	if base == "" {
		return "", fmt.Errorf("modeldir: %s: base_model_name_or_path is empty", filepath.Join(dir, peft.ConfigFile))
	}
	if !filepath.IsAbs(base) {
		base = filepath.Join(dir, base)
	}
	if _, err := os.Stat(filepath.Join(base, hf.ConfigFile)); err != nil {
		return "", fmt.Errorf("modeldir: %s: base_model_name_or_path %q: %w", filepath.Join(dir, peft.ConfigFile), c.BaseModelNameOrPath, ErrNoLocalBase)
	}
	return base, nil
}

// loadAdapter loads the base of the adapter in dir and merges the adapter.
func loadAdapter(dir string) (*Policy, error) {
	base, err := AdapterBase(dir)
	if err != nil {
		return nil, err
	}
	p, err := Load(base)
	if err != nil {
		return nil, err
	}
	a, err := peft.ReadFor(dir, p.Model.Config)
	if err != nil {
		return nil, err
	}
	if err := peft.Merge(p.Model, a); err != nil {
		return nil, err
	}
	p.Dir = dir
	return p, nil
}

// IsRoot reports whether dir is an output root with a checkpoint index
// rather than a model directory.
func IsRoot(dir string) bool { return hasInsteadOfConfig(dir, checkpoint.IndexFile) }

// Resolve returns the model directory path names: path itself when it is
// a model directory, else (an output root) the newest checkpoint whose
// hashes verify, with its version and step. Corrupt checkpoints are
// skipped with a warning on log (nil: slog.Default()).
func Resolve(path string, log *slog.Logger) (dir string, version, step int64, err error) {
	if !IsRoot(path) {
		if IsAdapter(path) {
			return path, -1, 0, nil
		}
		if _, err := os.Stat(filepath.Join(path, hf.ConfigFile)); err != nil {
			return "", 0, 0, fmt.Errorf("modeldir: %s is neither a model directory (no config.json), an adapter (no %s) nor an output root (no %s)", path, peft.ConfigFile, checkpoint.IndexFile)
		}
		return path, -1, 0, nil
	}
	st, err := checkpoint.Open(checkpoint.Config{Dir: path, Log: log, ReadOnly: true})
	if err != nil {
		return "", 0, 0, err
	}
	v, err := st.LatestGood()
	if err != nil {
		return "", 0, 0, err
	}
	return st.Path(v.Version), v.Version, v.Step, nil
}

// Open resolves path (see Resolve) and loads the model directory.
func Open(path string, log *slog.Logger) (*Policy, error) {
	dir, v, step, err := Resolve(path, log)
	if err != nil {
		return nil, err
	}
	p, err := Load(dir)
	if err != nil {
		return nil, err
	}
	p.Version, p.Step = v, step
	return p, nil
}

// TrainerStateDir is the subdirectory of a checkpoint holding what
// training needs to continue exactly (the AdamW moments). Loaders of the
// Hugging Face layout ignore it.
const TrainerStateDir = "trainer_state"

// WriteCheckpoint writes m into dir as a copy of the model directory src
// with new weights: config.json from src with torch_dtype float32 (the
// weights are written as F32), every other file of src (tokenizer,
// generation config, …) copied byte for byte; src's weights, shard index
// and trainer state are not copied.
//
// With tiedHead, a model with tied embeddings also gets lm_head.weight, a
// copy of model.embed_tokens.weight, which Hugging Face loaders (and
// swerl's) take as the tied tensor it is. It is for engines that reload
// weights in place: vLLM's reload_weights prepares again only the layers
// it is given tensors for, so without lm_head.weight its output layer
// keeps the weights the engine last loaded it from (its start), and the
// engine samples from neither version.
func WriteCheckpoint(dir, src string, m *gpu.Model, tiedHead bool) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("modeldir: %w", err)
	}
	ts := m.Tensors()
	if tiedHead && m.Config.TieWordEmbeddings {
		for _, t := range ts {
			if t.Name == "model.embed_tokens.weight" {
				ts = append(ts, gpu.Tensor{Name: "lm_head.weight", Shape: t.Shape, Data: t.Data})
				break
			}
		}
	}
	files, err := hf.SaveWeights(dir, ts, hf.SaveOptions{})
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return nil, fmt.Errorf("modeldir: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasSuffix(name, ".safetensors") || name == hf.WeightsIndexFile || strings.HasPrefix(name, ".") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return nil, fmt.Errorf("modeldir: %w", err)
		}
		if name == hf.ConfigFile {
			var cfg map[string]any
			if err := json.Unmarshal(data, &cfg); err != nil {
				return nil, fmt.Errorf("modeldir: %s: %w", filepath.Join(src, name), err)
			}
			cfg["torch_dtype"] = "float32"
			if data, err = json.MarshalIndent(cfg, "", "  "); err != nil {
				return nil, fmt.Errorf("modeldir: %w", err)
			}
			data = append(data, '\n')
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return nil, fmt.Errorf("modeldir: %w", err)
		}
		files = append(files, name)
	}
	return files, nil
}
