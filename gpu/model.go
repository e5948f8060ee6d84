package gpu

// Dimension legend, used in the shape comments of this file:
//
//	B   batch size (sequences)          T   sequence length (tokens)
//	N   rows, B*T                       C   hidden size (channels)
//	V   vocabulary size                 L   number of layers
//	NH  query heads                     NKV key/value heads (GQA)
//	HS  head size                       QC  NH*HS, KVC NKV*HS
//	I   MLP intermediate size           P   max positions (RoPE tables)

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// RopeScaling mirrors the rope_scaling object of a Hugging Face
// config.json. Only rope_type "llama3" (Llama 3.1+) changes the
// frequencies; an empty RopeType means no scaling.
type RopeScaling struct {
	RopeType                      string  `json:"rope_type,omitempty"`
	Type                          string  `json:"type,omitempty"` // older spelling of rope_type
	Factor                        float64 `json:"factor,omitempty"`
	LowFreqFactor                 float64 `json:"low_freq_factor,omitempty"`
	HighFreqFactor                float64 `json:"high_freq_factor,omitempty"`
	OriginalMaxPositionEmbeddings int     `json:"original_max_position_embeddings,omitempty"`
}

// Config is the architecture, with the JSON keys of a Hugging Face
// config.json for Llama and Qwen2 models, so config.json unmarshals into it
// directly. Unknown keys are ignored.
type Config struct {
	ModelType             string       `json:"model_type,omitempty"` // "llama", "qwen2", ...
	HiddenSize            int          `json:"hidden_size"`          // C
	IntermediateSize      int          `json:"intermediate_size"`    // I
	NumHiddenLayers       int          `json:"num_hidden_layers"`    // L
	NumAttentionHeads     int          `json:"num_attention_heads"`  // NH
	NumKeyValueHeads      int          `json:"num_key_value_heads"`  // NKV; 0 means NH
	HeadDim               int          `json:"head_dim,omitempty"`   // HS; 0 means C/NH
	VocabSize             int          `json:"vocab_size"`           // V
	MaxPositionEmbeddings int          `json:"max_position_embeddings"`
	RMSNormEps            float64      `json:"rms_norm_eps"`
	RopeTheta             float64      `json:"rope_theta"`
	RopeScaling           *RopeScaling `json:"rope_scaling,omitempty"`
	TieWordEmbeddings     bool         `json:"tie_word_embeddings"`
	// AttentionBias adds biases to q, k and v (and not o), as Qwen2 does.
	// Qwen2 configs omit the key and always have the biases: see
	// UnmarshalJSON.
	AttentionBias bool `json:"attention_bias"`
	BosTokenID    int  `json:"bos_token_id,omitempty"`
	EosTokenID    any  `json:"eos_token_id,omitempty"` // an int or a list of ints in HF files
}

// UnmarshalJSON decodes a Hugging Face config.json. A qwen2 config without
// an attention_bias key gets AttentionBias true, as transformers' Qwen2
// model always has q/k/v biases.
func (c *Config) UnmarshalJSON(b []byte) error {
	type plain Config
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if p.ModelType == "qwen2" {
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(b, &keys); err != nil {
			return err
		}
		if _, ok := keys["attention_bias"]; !ok {
			p.AttentionBias = true
		}
	}
	*c = Config(p)
	return nil
}

// KVHeads returns NKV (NumKeyValueHeads, or NumAttentionHeads when 0).
func (c Config) KVHeads() int {
	if c.NumKeyValueHeads == 0 {
		return c.NumAttentionHeads
	}
	return c.NumKeyValueHeads
}

// HeadSize returns HS (HeadDim, or HiddenSize/NumAttentionHeads when 0).
func (c Config) HeadSize() int {
	if c.HeadDim != 0 {
		return c.HeadDim
	}
	if c.NumAttentionHeads == 0 {
		return 0
	}
	return c.HiddenSize / c.NumAttentionHeads
}

// Validate reports the first field that makes the architecture unusable.
func (c Config) Validate() error {
	pos := func(name string, v int) error {
		if v <= 0 {
			return fmt.Errorf("gpu: config %s must be positive, got %d", name, v)
		}
		return nil
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize},
		{"num_hidden_layers", c.NumHiddenLayers}, {"num_attention_heads", c.NumAttentionHeads},
		{"vocab_size", c.VocabSize}, {"max_position_embeddings", c.MaxPositionEmbeddings},
	} {
		if err := pos(f.name, f.v); err != nil {
			return err
		}
	}
	if c.NumKeyValueHeads < 0 || c.NumAttentionHeads%c.KVHeads() != 0 {
		return fmt.Errorf("gpu: config num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumAttentionHeads, c.KVHeads())
	}
	hs := c.HeadSize()
	if hs <= 0 || hs%2 != 0 {
		return fmt.Errorf("gpu: config head size %d must be positive and even (head_dim or hidden_size/num_attention_heads)", hs)
	}
	if c.HeadDim == 0 && c.HiddenSize%c.NumAttentionHeads != 0 {
		return fmt.Errorf("gpu: config hidden_size %d is not a multiple of num_attention_heads %d", c.HiddenSize, c.NumAttentionHeads)
	}
	if !(c.RMSNormEps > 0) {
		return errors.New("gpu: config rms_norm_eps must be positive")
	}
	if !(c.RopeTheta > 0) {
		return errors.New("gpu: config rope_theta must be positive")
	}
	if s := c.RopeScaling; s != nil {
		switch s.kind() {
		case "", "default":
		case "llama3":
			if !(s.Factor > 0) || !(s.LowFreqFactor > 0) || !(s.HighFreqFactor > s.LowFreqFactor) || s.OriginalMaxPositionEmbeddings <= 0 {
				return errors.New("gpu: config rope_scaling llama3 needs factor > 0, 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings > 0")
			}
		default:
			return fmt.Errorf("gpu: config rope_scaling rope_type %q is not supported (want llama3)", s.kind())
		}
	}
	return nil
}

func (s *RopeScaling) kind() string {
	if s.RopeType != "" {
		return s.RopeType
	}
	return s.Type
}

// TinyConfig is the built-in tiny model: a Qwen2-style decoder (q/k/v bias,
// grouped-query attention, tied embeddings) small enough to train in tests
// on a CPU. Its vocabulary (512) covers the built-in tokenizer's byte-level
// ids; random weights come from NewModel(TinyConfig(), seed).
func TinyConfig() Config {
	return Config{
		ModelType:             "qwen2",
		HiddenSize:            64,
		IntermediateSize:      176,
		NumHiddenLayers:       2,
		NumAttentionHeads:     4,
		NumKeyValueHeads:      2,
		VocabSize:             512,
		MaxPositionEmbeddings: 1024,
		RMSNormEps:            1e-6,
		RopeTheta:             10000,
		TieWordEmbeddings:     true,
		AttentionBias:         true,
	}
}

// ropeTables fills cos and sin [P, HS/2] for positions 0..P-1, with the
// inverse frequencies theta^(-2i/HS), adjusted by llama3 rope scaling when
// configured (the same piecewise rule as transformers'
// _compute_llama3_parameters).
func ropeTables(c Config, P int) (cos, sin []float32) {
	hs := c.HeadSize()
	half := hs / 2
	inv := make([]float64, half)
	for i := range inv {
		inv[i] = 1 / math.Pow(c.RopeTheta, float64(2*i)/float64(hs))
	}
	if s := c.RopeScaling; s != nil && s.kind() == "llama3" {
		old := float64(s.OriginalMaxPositionEmbeddings)
		lowWavelen := old / s.LowFreqFactor
		highWavelen := old / s.HighFreqFactor
		for i, f := range inv {
			wavelen := 2 * math.Pi / f
			switch {
			case wavelen < highWavelen:
				// high frequency: unchanged
			case wavelen > lowWavelen:
				inv[i] = f / s.Factor
			default:
				smooth := (old/wavelen - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
				inv[i] = (1-smooth)*f/s.Factor + smooth*f
			}
		}
	}
	cos = make([]float32, P*half)
	sin = make([]float32, P*half)
	for p := 0; p < P; p++ {
		for i, f := range inv {
			// float32 frequencies as transformers computes them, then the
			// angle in float64 so large positions keep their precision.
			a := float64(p) * float64(float32(f))
			cos[p*half+i] = float32(math.Cos(a))
			sin[p*half+i] = float32(math.Sin(a))
		}
	}
	return cos, sin
}
