package arch

import (
	"encoding/json"
	"strings"
	"testing"
)

// The shape fields of published config.json files.
const (
	// meta-llama/Llama-3.1-70B: 70,553,706,496 parameters.
	llama31_70B = `{"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
		"num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
		"vocab_size": 128256, "max_position_embeddings": 131072, "tie_word_embeddings": false,
		"rms_norm_eps": 1e-05, "rope_theta": 500000.0}`
	// meta-llama/Llama-3.1-405B: 405,853,388,800 parameters.
	llama31_405B = `{"model_type": "llama", "hidden_size": 16384, "intermediate_size": 53248,
		"num_hidden_layers": 126, "num_attention_heads": 128, "num_key_value_heads": 8,
		"vocab_size": 128256, "max_position_embeddings": 131072, "tie_word_embeddings": false,
		"rms_norm_eps": 1e-05, "rope_theta": 500000.0}`
	// Qwen/Qwen2.5-72B: 72,706,203,648 parameters.
	qwen25_72B = `{"model_type": "qwen2", "hidden_size": 8192, "intermediate_size": 29568,
		"num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
		"vocab_size": 152064, "max_position_embeddings": 32768, "tie_word_embeddings": false,
		"rms_norm_eps": 1e-06, "rope_theta": 1000000.0}`
)

func parse(t *testing.T, s string) Config {
	t.Helper()
	var c Config
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLargeModelsAccepted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		json   string
		params int64
	}{
		{"llama-3.1-70B", llama31_70B, 70553706496},
		{"llama-3.1-405B", llama31_405B, 405853388800},
		{"qwen2.5-72B", qwen25_72B, 72706203648},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := parse(t, tc.json)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			if n := c.NumParams(); n != tc.params {
				t.Errorf("NumParams = %d, want %d", n, tc.params)
			}
		})
	}
}

func TestValidateShapeRejectsHugeConfigs(t *testing.T) {
	for _, tc := range []struct {
		name, edit, field string
	}{
		{"a billion layers", `"num_hidden_layers": 1000000000`, "num_hidden_layers"},
		{"a trillion-token vocabulary", `"vocab_size": 1000000000000`, "vocab_size"},
		{"negative vocabulary", `"vocab_size": -1`, "vocab_size"},
		{"huge hidden size", `"hidden_size": 8589934592`, "hidden_size"},
		{"huge intermediate size", `"intermediate_size": 1000000000`, "intermediate_size"},
		{"huge head_dim", `"head_dim": 1000000`, "head_dim"},
		{"huge kv heads", `"num_key_value_heads": 1000000`, "num_key_value_heads"},
		{"negative kv heads", `"num_key_value_heads": -8`, "num_key_value_heads"},
		{"huge context", `"max_position_embeddings": 1099511627776`, "max_position_embeddings"},
		{"huge heads", `"num_attention_heads": 1048576`, "num_attention_heads"},
		{"one head of 8192", `"num_attention_heads": 1, "num_key_value_heads": 1`, "head size 8192"},
		// Every dimension within its bound, the total not: 1024 layers
		// of the 405B layer are 3.3T parameters.
		{"too many parameters", `"hidden_size": 16384, "intermediate_size": 53248, "num_attention_heads": 128, "num_hidden_layers": 1024`, "parameters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Later keys win in encoding/json, so appending overrides.
			c := parse(t, strings.TrimSuffix(llama31_70B, "}")+", "+tc.edit+"}")
			err := c.ValidateShape()
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("ValidateShape() = %v, want an error naming %q", err, tc.field)
			}
			if err := c.Validate(); err == nil {
				t.Error("Validate accepted what ValidateShape refused")
			}
		})
	}
}

// Tensors and NumParams count the same parameters, and the list has the
// documented order and entries.
func TestTensorsMatchNumParams(t *testing.T) {
	for _, c := range []Config{
		{HiddenSize: 8, IntermediateSize: 12, NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2, VocabSize: 11, TieWordEmbeddings: true, AttentionBias: true},
		{HiddenSize: 8, IntermediateSize: 12, NumHiddenLayers: 3, NumAttentionHeads: 2, HeadDim: 6, VocabSize: 5},
		parse(t, llama31_70B),
	} {
		ts := c.Tensors()
		var n int64
		for _, s := range ts {
			n += int64(Numel(s.Shape))
		}
		if n != c.NumParams() {
			t.Errorf("%+v: tensors hold %d parameters, NumParams %d", c, n, c.NumParams())
		}
		per := 9 // 2 norms, q, k, v, o, gate, up, down
		if c.AttentionBias {
			per = 12
		}
		want := 2 + c.NumHiddenLayers*per
		if !c.TieWordEmbeddings {
			want++
		}
		if len(ts) != want || ts[0].Name != "model.embed_tokens.weight" {
			t.Errorf("%d tensors starting with %s, want %d starting with the embeddings", len(ts), ts[0].Name, want)
		}
	}
}
