package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"swerl/gpu/gguf"
	"swerl/gpu/hf"
)

func runModelImport(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("model import", "FILE.gguf --out DIR [--dtype bf16|f32]", stderr)
	out := fs.String("out", "", "directory to write the model into (created; must not hold a model)")
	dtype := fs.String("dtype", "bf16", "element type of the written weights: bf16, f16 or f32 (f32 keeps every dequantized value exactly)")
	file := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		file, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	if file == "" || *out == "" {
		return usagef("want: swerl model import FILE.gguf --out DIR")
	}
	dt, err := hf.ParseDType(*dtype)
	if err != nil {
		return usagef("--dtype: %v", err)
	}
	_, statErr := os.Stat(*out)
	sum, err := gguf.Import(file, *out, dt)
	if err != nil {
		if os.IsNotExist(statErr) {
			os.RemoveAll(*out) // a folder this run created holds no usable model
		}
		return err
	}
	c := sum.Config
	fmt.Fprintf(stderr, "swerl model import: %s (%s, %d layers, width %d, %d heads over %d KV heads, vocabulary %d, %.1fM parameters; tensors %s) written to %s as %s: %s\n",
		file, c.ModelType, c.NumHiddenLayers, c.HiddenSize, c.NumAttentionHeads, c.KVHeads(), c.VocabSize, float64(sum.Params)/1e6,
		typeCounts(sum.Types), *out, dt, strings.Join(sum.Files, ", "))
	return nil
}

func typeCounts(m map[string]int) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%d %s", v, k))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// ggufFileInfo is what swerl model info prints for a GGUF file.
type ggufFileInfo struct {
	File      string            `json:"file"`
	Version   uint32            `json:"gguf_version"`
	Arch      string            `json:"architecture"`
	Name      string            `json:"name,omitempty"`
	ModelType string            `json:"model_type,omitempty"`
	Params    int64             `json:"params"`
	Layers    int               `json:"layers,omitempty"`
	Hidden    int               `json:"hidden_size,omitempty"`
	Heads     int               `json:"heads,omitempty"`
	KVHeads   int               `json:"kv_heads,omitempty"`
	VocabSize int               `json:"vocab_size,omitempty"`
	Context   int               `json:"max_position_embeddings,omitempty"`
	Tensors   int               `json:"tensors"`
	Types     map[string]int    `json:"tensor_types"`
	Tokenizer string            `json:"tokenizer,omitempty"`
	Metadata  map[string]string `json:"metadata"`
	// Importable is empty when swerl model import converts the file, and
	// otherwise says why not.
	Importable string `json:"import_error,omitempty"`
}

func ggufInfo(path string, stdout io.Writer) error {
	g, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer g.Close()
	info := ggufFileInfo{File: path, Version: g.Version, Tensors: len(g.Tensors), Types: map[string]int{}, Metadata: map[string]string{}}
	info.Arch, _ = g.String("general.architecture")
	info.Name, _ = g.String("general.name")
	info.Tokenizer, _ = g.String("tokenizer.ggml.model")
	for _, t := range g.Tensors {
		info.Types[t.Type.String()]++
		info.Params += t.Elements()
	}
	for _, kv := range g.KV {
		if a, ok := kv.Value.(gguf.Array); ok {
			info.Metadata[kv.Key] = fmt.Sprintf("[%d × %s]", a.Len(), a.Elem)
			continue
		}
		s := fmt.Sprint(kv.Value)
		if len(s) > 80 {
			s = s[:80] + "…"
		}
		info.Metadata[kv.Key] = s
	}
	if c, err := g.Config(); err != nil {
		info.Importable = err.Error()
	} else {
		info.ModelType, info.Layers, info.Hidden, info.Heads, info.KVHeads = c.ModelType, c.NumHiddenLayers, c.HiddenSize, c.NumAttentionHeads, c.KVHeads()
		info.VocabSize, info.Context = c.VocabSize, c.MaxPositionEmbeddings
		for _, t := range g.Tensors {
			if !t.Type.Dequantizable() {
				info.Importable = fmt.Sprintf("tensor %s has type %s, which swerl does not dequantize", t.Name, t.Type)
				break
			}
		}
		if info.Importable == "" {
			if _, _, err := g.Tokenizer(c.MaxPositionEmbeddings); err != nil {
				info.Importable = err.Error()
			}
		}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(info)
}
