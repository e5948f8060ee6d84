// Package arch describes the Llama-style decoder family (Llama, Mistral,
// Qwen2) once, for the model (swerl/gpu) and the Hugging Face file layout
// (swerl/gpu/hf): the config.json fields that fix the architecture, the
// bounds swerl accepts for them, the list of parameter tensors with their
// Hugging Face names and shapes, and the Tensor type both packages hand
// around.
//
// # Behavior
//
// ValidateShape checks every dimension against a bound and the total
// parameter bytes against a limit before anything is allocated, so a
// config.json claiming a billion layers or a trillion-token vocabulary is
// an error naming the field, not an out-of-memory crash. The bounds are
// several times the largest published models (Llama 3.1 405B: hidden
// 16384, intermediate 53248, 126 layers, 128 heads; vocabularies up to
// 262144), and the parameter limit (2 TiB of float32, about 550B
// parameters) admits every 70B-class and 405B model.
package arch

import (
	"encoding/json"
	"errors"
	"fmt"
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

// Kind returns rope_type, or the older type key when rope_type is empty.
func (s *RopeScaling) Kind() string {
	if s.RopeType != "" {
		return s.RopeType
	}
	return s.Type
}

// Config is the architecture, with the JSON keys of a Hugging Face
// config.json for Llama and Qwen2 models, so config.json unmarshals into it
// directly. Unknown keys are ignored. The shape comments use the dimension
// legend of package gpu.
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

// Upper bounds of the dimensions swerl accepts (see the package comment).
const (
	MaxHiddenSize       = 1 << 16
	MaxIntermediateSize = 1 << 18
	MaxLayers           = 1 << 10
	MaxHeads            = 1 << 10
	MaxHeadDim          = 1 << 10
	MaxVocabSize        = 1 << 22
	MaxPositions        = 1 << 24
	// MaxParamBytes bounds the parameters held as float32.
	MaxParamBytes = 1 << 41
)

// ValidateShape reports the first field that makes the tensor list
// unusable: a dimension that is not positive or is above its bound, heads
// that do not divide, or parameters above MaxParamBytes. It is all a reader
// or writer of model files needs; Validate adds what running the model
// needs. It allocates nothing, so it can run on any decoded config.json.
func (c Config) ValidateShape() error {
	// min 0 marks the optional fields, where 0 means the default.
	for _, f := range []struct {
		name        string
		v, min, max int
	}{
		{"hidden_size", c.HiddenSize, 1, MaxHiddenSize},
		{"intermediate_size", c.IntermediateSize, 1, MaxIntermediateSize},
		{"num_hidden_layers", c.NumHiddenLayers, 1, MaxLayers},
		{"num_attention_heads", c.NumAttentionHeads, 1, MaxHeads},
		{"vocab_size", c.VocabSize, 1, MaxVocabSize},
		{"num_key_value_heads", c.NumKeyValueHeads, 0, MaxHeads},
		{"head_dim", c.HeadDim, 0, MaxHeadDim},
		{"max_position_embeddings", c.MaxPositionEmbeddings, 0, MaxPositions},
	} {
		if f.v < f.min || f.v > f.max {
			return fmt.Errorf("config %s %d is outside %d..%d", f.name, f.v, f.min, f.max)
		}
	}
	if c.NumAttentionHeads%c.KVHeads() != 0 {
		return fmt.Errorf("config num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumAttentionHeads, c.KVHeads())
	}
	if c.HeadDim == 0 && c.HiddenSize%c.NumAttentionHeads != 0 {
		return fmt.Errorf("config hidden_size %d is not a multiple of num_attention_heads %d", c.HiddenSize, c.NumAttentionHeads)
	}
	if hs := c.HeadSize(); hs <= 0 || hs > MaxHeadDim {
		return fmt.Errorf("config head size %d (hidden_size/num_attention_heads) is outside 1..%d", hs, MaxHeadDim)
	}
	if n := c.NumParams(); n > MaxParamBytes/4 {
		return fmt.Errorf("config describes %d parameters (%d GiB as float32), more than the %d GiB swerl accepts",
			n, n*4>>30, int64(MaxParamBytes)>>30)
	}
	return nil
}

// Validate reports the first field that makes the architecture unusable
// for the model: ValidateShape, then max_position_embeddings, an even head
// size (RoPE rotates pairs), rms_norm_eps, rope_theta and rope_scaling.
func (c Config) Validate() error {
	if err := c.ValidateShape(); err != nil {
		return err
	}
	if c.MaxPositionEmbeddings <= 0 {
		return fmt.Errorf("config max_position_embeddings must be positive, got %d", c.MaxPositionEmbeddings)
	}
	if hs := c.HeadSize(); hs%2 != 0 {
		return fmt.Errorf("config head size %d must be even (head_dim or hidden_size/num_attention_heads)", hs)
	}
	if !(c.RMSNormEps > 0) {
		return errors.New("config rms_norm_eps must be positive")
	}
	if !(c.RopeTheta > 0) {
		return errors.New("config rope_theta must be positive")
	}
	if s := c.RopeScaling; s != nil {
		switch s.Kind() {
		case "", "default":
		case "llama3":
			if !(s.Factor > 0) || !(s.LowFreqFactor > 0) || !(s.HighFreqFactor > s.LowFreqFactor) || s.OriginalMaxPositionEmbeddings <= 0 {
				return errors.New("config rope_scaling llama3 needs factor > 0, 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings > 0")
			}
		default:
			return fmt.Errorf("config rope_scaling rope_type %q is not supported (want llama3)", s.Kind())
		}
	}
	return nil
}

// NumParams counts the parameters of the tensor list (a tied lm_head once)
// in int64, without building the list. Within the dimension bounds of
// ValidateShape it cannot overflow.
func (c Config) NumParams() int64 {
	C, I, V := int64(c.HiddenSize), int64(c.IntermediateSize), int64(c.VocabSize)
	QC := int64(c.NumAttentionHeads) * int64(c.HeadSize())
	KVC := int64(c.KVHeads()) * int64(c.HeadSize())
	per := 2*C + QC*C + 2*KVC*C + C*QC + 3*I*C
	if c.AttentionBias {
		per += QC + 2*KVC
	}
	n := V*C + int64(c.NumHiddenLayers)*per + C
	if !c.TieWordEmbeddings {
		n += V * C
	}
	return n
}

// TensorSpec is the Hugging Face name and row-major shape of one
// parameter tensor.
type TensorSpec struct {
	Name  string
	Shape []int
}

// Tensors lists the parameter tensors of c in the order transformers
// declares them and swerl lays them out and writes them: the embeddings,
// then each layer (input norm, q, k, v with their biases under
// attention_bias, o, post-attention norm, gate, up, down), the final norm,
// and lm_head unless the embeddings are tied. Linear weights are
// [out, in]. Call it on a config that passed ValidateShape: the list has 9
// entries per layer, 12 with attention_bias.
func (c Config) Tensors() []TensorSpec {
	C, I, V := c.HiddenSize, c.IntermediateSize, c.VocabSize
	QC, KVC := c.NumAttentionHeads*c.HeadSize(), c.KVHeads()*c.HeadSize()
	out := make([]TensorSpec, 0, 3+12*max(c.NumHiddenLayers, 0))
	add := func(name string, shape ...int) { out = append(out, TensorSpec{name, shape}) }
	add("model.embed_tokens.weight", V, C)
	for l := range c.NumHiddenLayers {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", C)
		add(p+"self_attn.q_proj.weight", QC, C)
		if c.AttentionBias {
			add(p+"self_attn.q_proj.bias", QC)
		}
		add(p+"self_attn.k_proj.weight", KVC, C)
		if c.AttentionBias {
			add(p+"self_attn.k_proj.bias", KVC)
		}
		add(p+"self_attn.v_proj.weight", KVC, C)
		if c.AttentionBias {
			add(p+"self_attn.v_proj.bias", KVC)
		}
		add(p+"self_attn.o_proj.weight", C, QC)
		add(p+"post_attention_layernorm.weight", C)
		add(p+"mlp.gate_proj.weight", I, C)
		add(p+"mlp.up_proj.weight", I, C)
		add(p+"mlp.down_proj.weight", C, I)
	}
	add("model.norm.weight", C)
	if !c.TieWordEmbeddings {
		add("lm_head.weight", V, C)
	}
	return out
}

// Numel returns the number of elements of shape (1 for a scalar).
func Numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// Tensor is one named tensor, row-major, held as float32 whatever its
// on-disk type: a parameter of a model (then a view into its arena) or a
// tensor read from or written to a safetensors file.
type Tensor struct {
	Name  string // Hugging Face name, e.g. "model.layers.0.self_attn.q_proj.weight"
	Shape []int  // row-major, Hugging Face order
	Data  []float32
}
