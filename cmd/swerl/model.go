package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"swerl/gpu/modeldir"
)

func init() {
	register(&command{name: "model", summary: "create (init) or describe (info) a policy model directory", run: runModel})
}

func runModel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("want a subcommand: init or info")
	}
	switch args[0] {
	case "init":
		return runModelInit(args[1:], stdout, stderr)
	case "info":
		return runModelInfo(args[1:], stdout, stderr)
	case "-h", "-help", "--help":
		fmt.Fprintf(stdout, "Usage:\n  swerl model init --out DIR [--seed N] [--config %s]\n  swerl model info DIR\n", strings.Join(modeldir.BuiltinNames(), "|"))
		return nil
	}
	return usagef("unknown subcommand %q: want init or info", args[0])
}

func runModelInit(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("model init", "--out DIR [--seed N] [--config tiny|small]", stderr)
	out := fs.String("out", "", "directory to write the model into (created)")
	seed := fs.Uint64("seed", 1, "seed of the random weights")
	config := fs.String("config", "tiny", "built-in configuration: "+strings.Join(modeldir.BuiltinNames(), ", "))
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
	fs := newFlags("model info", "DIR (a model directory or an output root with checkpoints)", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("want one model directory or output root")
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
