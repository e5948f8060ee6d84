package gpu_test

import (
	"encoding/json"
	"strings"
	"testing"

	"swerl/gpu"
	"swerl/gpu/arch"
	"swerl/gpu/cpu"
)

// The config.json of Qwen/Qwen2.5-0.5B-Instruct (abridged to the keys the
// model reads plus a few it ignores).
const qwen25Config = `{
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "hidden_act": "silu",
  "hidden_size": 896,
  "initializer_range": 0.02,
  "intermediate_size": 4864,
  "max_position_embeddings": 32768,
  "max_window_layers": 21,
  "model_type": "qwen2",
  "num_attention_heads": 14,
  "num_hidden_layers": 24,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 32768,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
}`

// The config.json of meta-llama/Llama-3.2-1B (abridged).
const llama32Config = `{
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "head_dim": 64,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "intermediate_size": 8192,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 16,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0,
  "tie_word_embeddings": true,
  "vocab_size": 128256
}`

func TestConfigJSON(t *testing.T) {
	var q gpu.Config
	if err := json.Unmarshal([]byte(qwen25Config), &q); err != nil {
		t.Fatal(err)
	}
	if err := q.Validate(); err != nil {
		t.Fatal(err)
	}
	if !q.AttentionBias || q.KVHeads() != 2 || q.HeadSize() != 64 || !q.TieWordEmbeddings || q.RopeTheta != 1e6 {
		t.Errorf("qwen2.5: %+v", q)
	}
	var l gpu.Config
	if err := json.Unmarshal([]byte(llama32Config), &l); err != nil {
		t.Fatal(err)
	}
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	if l.AttentionBias || l.RopeScaling == nil || l.RopeScaling.Factor != 32 || l.HeadSize() != 64 || l.KVHeads() != 8 {
		t.Errorf("llama3.2: %+v", l)
	}
	// Round trip: marshal and unmarshal keep the architecture.
	b, _ := json.Marshal(q)
	var back gpu.Config
	if err := json.Unmarshal(b, &back); err != nil || back.HiddenSize != 896 || !back.AttentionBias {
		t.Errorf("round trip: %v %+v", err, back)
	}
	// Llama's parameter count is known: 1,235,814,400 for Llama-3.2-1B.
	if n := l.NumParams(); n != 1235814400 {
		t.Errorf("llama3.2-1B parameters %d, want 1235814400", n)
	}
	// Qwen2.5-0.5B: 494,032,768.
	if n := q.NumParams(); n != 494032768 {
		t.Errorf("qwen2.5-0.5B parameters %d, want 494032768", n)
	}
}

func TestConfigValidate(t *testing.T) {
	base := gpu.TinyConfig()
	for _, tc := range []struct {
		name    string
		edit    func(*gpu.Config)
		wantErr string
	}{
		{"valid", func(*gpu.Config) {}, ""},
		{"no layers", func(c *gpu.Config) { c.NumHiddenLayers = 0 }, "num_hidden_layers"},
		{"heads not a multiple of kv heads", func(c *gpu.Config) { c.NumKeyValueHeads = 3 }, "num_key_value_heads"},
		{"odd head size", func(c *gpu.Config) { c.HeadDim = 7 }, "head size"},
		{"hidden not a multiple of heads", func(c *gpu.Config) { c.HiddenSize = 66 }, "hidden_size"},
		{"zero eps", func(c *gpu.Config) { c.RMSNormEps = 0 }, "rms_norm_eps"},
		{"zero theta", func(c *gpu.Config) { c.RopeTheta = 0 }, "rope_theta"},
		{"unknown rope type", func(c *gpu.Config) { c.RopeScaling = &gpu.RopeScaling{RopeType: "yarn"} }, "yarn"},
		{"bad llama3 scaling", func(c *gpu.Config) { c.RopeScaling = &gpu.RopeScaling{RopeType: "llama3", Factor: 8} }, "llama3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.edit(&c)
			err := c.Validate()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Validate() = %v\nwant an error naming %q", err, tc.wantErr)
			}
		})
	}
}

// FuzzConfigJSON: any bytes either fail to decode or validate, or give a
// config whose (small) model builds and runs a forward pass.
func FuzzConfigJSON(f *testing.F) {
	f.Add([]byte(qwen25Config))
	f.Add([]byte(llama32Config))
	tiny, _ := json.Marshal(gpu.TinyConfig())
	f.Add(tiny)
	f.Add([]byte(`{"hidden_size": 8, "intermediate_size": 4, "num_hidden_layers": 1, "num_attention_heads": 2,
		"vocab_size": 5, "max_position_embeddings": 4, "rms_norm_eps": 1e-5, "rope_theta": 10,
		"rope_scaling": {"rope_type": "llama3", "factor": 2, "low_freq_factor": 1, "high_freq_factor": 2, "original_max_position_embeddings": 2}}`))
	f.Add([]byte(`{"model_type": "qwen2", "hidden_size": -1}`))
	// The config.json of issue #24, which ran out of memory, and a
	// trillion-token vocabulary.
	f.Add([]byte(`{"hidden_size": 8, "intermediate_size": 4, "num_hidden_layers": 1000000000, "num_attention_heads": 2,
		"vocab_size": 5, "max_position_embeddings": 4, "rms_norm_eps": 1e-5, "rope_theta": 10}`))
	f.Add([]byte(`{"hidden_size": 8, "intermediate_size": 4, "num_hidden_layers": 1, "num_attention_heads": 2,
		"vocab_size": 1000000000000, "max_position_embeddings": 4, "rms_norm_eps": 1e-5, "rope_theta": 10}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var c gpu.Config
		if json.Unmarshal(b, &c) != nil {
			return
		}
		if c.ValidateShape() != nil {
			if c.Validate() == nil {
				t.Fatalf("%+v: Validate accepts what ValidateShape refuses", c)
			}
			return
		}
		// Accepted shapes are within the bounds, so nothing sized by
		// them can overflow or exhaust memory.
		if c.NumHiddenLayers > arch.MaxLayers || c.VocabSize > arch.MaxVocabSize || c.HiddenSize > arch.MaxHiddenSize ||
			c.IntermediateSize > arch.MaxIntermediateSize || c.HeadSize() > arch.MaxHeadDim || c.KVHeads() > arch.MaxHeads ||
			c.NumParams() > arch.MaxParamBytes/4 {
			t.Fatalf("ValidateShape accepted %+v (%d parameters)", c, c.NumParams())
		}
		if c.NumHiddenLayers <= 64 {
			var n int64
			for _, s := range c.Tensors() {
				n += int64(arch.Numel(s.Shape))
			}
			if n != c.NumParams() {
				t.Fatalf("%+v: tensors hold %d parameters, NumParams says %d", c, n, c.NumParams())
			}
		}
		if c.Validate() != nil {
			return
		}
		if c.NumParams() > 1<<16 || c.MaxPositionEmbeddings > 64 || c.NumHiddenLayers > 4 || c.HeadSize() > 64 {
			return // valid but too big to build in a fuzz iteration
		}
		m, err := gpu.NewModel(c, 1)
		if err != nil {
			t.Fatalf("valid config %+v: NewModel: %v", c, err)
		}
		be := cpu.New()
		defer be.Close()
		s, err := gpu.NewSampler(m, be, min(c.MaxPositionEmbeddings, 8))
		if err != nil {
			t.Fatalf("valid config %+v: NewSampler: %v", c, err)
		}
		if _, err := s.Sample([]int32{0}, gpu.SamplingParams{MaxTokens: 2}); err != nil && c.MaxPositionEmbeddings > 1 {
			t.Fatalf("valid config %+v: Sample: %v", c, err)
		}
	})
}
