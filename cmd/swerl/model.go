package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"swerl/gpu/hf"
	"swerl/gpu/modeldir"
	"swerl/gpu/peft"
	"swerl/gpu/policy"
)

func init() {
	register(&command{name: "model", summary: "create (init), import from GGUF (import), describe (info) or merge a LoRA adapter into (merge) a policy model directory", run: runModel})
}

func runModel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("want a subcommand: init, import, info or merge")
	}
	switch args[0] {
	case "init":
		return runModelInit(args[1:], stdout, stderr)
	case "import":
		return runModelImport(args[1:], stdout, stderr)
	case "info":
		return runModelInfo(args[1:], stdout, stderr)
	case "merge":
		return runModelMerge(args[1:], stdout, stderr)
	case "-h", "-help", "--help":
		fmt.Fprintf(stdout, "Usage:\n  swerl model init --out DIR [--seed N] [--config %s]\n  swerl model import FILE.gguf --out DIR [--dtype bf16|f32]\n  swerl model info DIR|FILE.gguf\n  swerl model merge [--base DIR] --adapter DIR --out DIR\n", strings.Join(modeldir.BuiltinNames(), "|"))
		return nil
	}
	return usagef("unknown subcommand %q: want init, import, info or merge", args[0])
}

func runModelInit(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("model init", "--out DIR [--seed N] [--config tiny|small]", stderr)
	out := fs.String("out", "", "directory to write the model into (created)")
	seed := fs.Uint64("seed", 1, "seed of the random weights")
	config := fs.String("config", "tiny", "built-in configuration: "+strings.Join(modeldir.BuiltinNames(), ", ")+" (the qwen ones: random weights at that model's exact shape, bf16)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return usagef("want --out DIR and no arguments")
	}
	if _, err := modeldir.BuiltinConfig(*config); err != nil {
		return usagef("--config: %v", err)
	}
	files, err := modeldir.Init(*out, *config, *seed)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "swerl model init: wrote the built-in %s model (seed %d) to %s: %s\n", *config, *seed, *out, strings.Join(files, ", "))
	return nil
}

// runModelMerge writes the base model with a PEFT LoRA adapter merged as
// a full Hugging Face model directory (F32 weights; config.json, tokenizer
// and the other files of the base copied), which swerl serve --model and
// other engines load without LoRA support. A merge whose weights are NaN
// or infinite, or whose forward pass on a probe prompt is, fails before
// anything is written.
func runModelMerge(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("model merge", "[--base DIR] --adapter DIR --out DIR", stderr)
	base := fs.String("base", "", "base model directory (default: the adapter's base_model_name_or_path)")
	adapter := fs.String("adapter", "", "PEFT LoRA adapter directory, or an output root of a LoRA run (its newest good version)")
	out := fs.String("out", "", "directory to write the merged model into (created; must not hold a model)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *adapter == "" || *out == "" || fs.NArg() > 0 {
		return usagef("want --adapter DIR and --out DIR and no arguments")
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	dir, _, _, err := modeldir.Resolve(*adapter, log)
	if err != nil {
		return err
	}
	if !modeldir.IsAdapter(dir) {
		return usagef("--adapter %s: %s has no %s", *adapter, dir, peft.ConfigFile)
	}
	if *base == "" {
		if *base, err = modeldir.AdapterBase(dir); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(*out, hf.ConfigFile)); err == nil {
		return usagef("--out %s already holds a model", *out)
	}
	if modeldir.IsAdapter(*base) {
		return usagef("--base %s is an adapter, not a model directory", *base)
	}
	bp, err := modeldir.Load(*base)
	if err != nil {
		return err
	}
	a, err := peft.ReadFor(dir, bp.Model.Config)
	if err != nil {
		return err
	}
	// Merge refuses a merged weight that is NaN or infinite; the probe, a
	// few greedy tokens, refuses finite weights that overflow in the
	// forward pass. Either way nothing is written.
	if err := peft.Merge(bp.Model, a); err != nil {
		return fmt.Errorf("merge %s into %s: %w; nothing written", dir, *base, err)
	}
	pol, err := policy.FromLoaded(&modeldir.Policy{Dir: dir, Model: bp.Model, Tokenizer: bp.Tokenizer, Stop: bp.Stop, Version: -1},
		policy.Options{MaxSeq: 64, Batch: 1, Log: log})
	if err != nil {
		return err
	}
	err = pol.Probe(context.Background())
	pol.Close()
	if err != nil {
		return fmt.Errorf("merge %s into %s: %w; nothing written", dir, *base, err)
	}
	_, statErr := os.Stat(*out)
	files, err := modeldir.WriteCheckpoint(*out, *base, bp.Model, false)
	if err != nil {
		if errors.Is(statErr, os.ErrNotExist) {
			os.RemoveAll(*out) // a folder this run created holds no usable model
		}
		return err
	}
	fmt.Fprintf(stderr, "swerl model merge: %s (r=%d, alpha %g, %s) merged into %s, written to %s: %s\n",
		dir, a.Config.R, a.Config.LoraAlpha, strings.Join(a.Config.TargetModules, ","), *base, *out, strings.Join(files, ", "))
	return nil
}

// modelInfo is what swerl model info prints, one JSON object.
type modelInfo struct {
	Dir        string   `json:"dir"`
	Version    int64    `json:"version"`
	Step       int64    `json:"step"`
	ModelType  string   `json:"model_type"`
	Params     int      `json:"params"`
	Layers     int      `json:"layers"`
	Hidden     int      `json:"hidden_size"`
	Heads      int      `json:"heads"`
	KVHeads    int      `json:"kv_heads"`
	VocabSize  int      `json:"vocab_size"`
	Context    int      `json:"max_position_embeddings"`
	Tokenizer  int      `json:"tokenizer_ids"`
	ChatFormat string   `json:"chat_format"`
	Stop       []int32  `json:"stop_token_ids"`
	StopText   []string `json:"stop_tokens"`
}

func runModelInfo(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("model info", "DIR|FILE.gguf (a model directory, an output root with checkpoints, or a GGUF file)", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("want one model directory, output root or GGUF file")
	}
	if st, err := os.Stat(fs.Arg(0)); err == nil && st.Mode().IsRegular() {
		return ggufInfo(fs.Arg(0), stdout)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	p, err := modeldir.Open(fs.Arg(0), log)
	if err != nil {
		return err
	}
	c := p.Model.Config
	info := modelInfo{
		Dir: p.Dir, Version: p.Version, Step: p.Step, ModelType: c.ModelType,
		Params: p.Model.NumParams(), Layers: c.NumHiddenLayers, Hidden: c.HiddenSize,
		Heads: c.NumAttentionHeads, KVHeads: c.KVHeads(), VocabSize: c.VocabSize,
		Context: c.MaxPositionEmbeddings, Tokenizer: p.Tokenizer.VocabSize(),
		ChatFormat: p.Tokenizer.Chat.Format.String(), Stop: p.Stop,
	}
	for _, id := range p.Stop {
		s, _ := p.Tokenizer.DecodeBytes(nil, []int32{id}, true)
		info.StopText = append(info.StopText, string(s))
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(info)
}
