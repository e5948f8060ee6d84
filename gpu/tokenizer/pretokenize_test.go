package tokenizer

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// pieces splits s with p.
func (p pretokenizer) pieces(s string) []string {
	out := []string{}
	for i := 0; i < len(s); {
		j := p.next(s, i)
		out = append(out, s[i:j])
		i = j
	}
	return out
}

// TestPretokenizeReference compares the scanners with the JavaScript RegExp
// engine running the same expressions (testdata/pretokenize_gen.js).
func TestPretokenizeReference(t *testing.T) {
	data, err := os.ReadFile("testdata/pretokenize.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden map[string][]struct {
		Text   string   `json:"text"`
		Pieces []string `json:"pieces"`
	}
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]pretokenizer{"gpt2": preGPT2, "qwen2": preQwen2, "llama3": preLlama3} {
		cases := golden[name]
		if len(cases) == 0 {
			t.Fatalf("%s: no golden cases", name)
		}
		fails := 0
		for _, c := range cases {
			if got := p.pieces(c.Text); !slices.Equal(got, c.Pieces) {
				fails++
				if fails <= 5 {
					t.Errorf("%s: split %q\n got  %q\n want %q", name, c.Text, got, c.Pieces)
				}
			}
		}
		if fails > 0 {
			t.Errorf("%s: %d of %d splits differ", name, fails, len(cases))
		}
	}
}

func TestPretokenizeCases(t *testing.T) {
	tests := []struct {
		name string
		pre  pretokenizer
		in   string
		want []string
	}{
		{"gpt2 trailing spaces before word", preGPT2, "a   b", []string{"a", "  ", " b"}},
		{"gpt2 spaces at end", preGPT2, "a   ", []string{"a", "   "}},
		{"gpt2 newline before word", preGPT2, "a\nb", []string{"a", "\n", "b"}},
		{"gpt2 contractions are case sensitive", preGPT2, "I'M", []string{"I", "'", "M"}},
		{"qwen2 contractions ignore case", preQwen2, "I'M", []string{"I", "'M"}},
		{"qwen2 long s folds to s", preQwen2, "it'ſ", []string{"it", "'ſ"}},
		{"qwen2 digits one by one", preQwen2, "2025", []string{"2", "0", "2", "5"}},
		{"llama3 digits by three", preLlama3, "1234567", []string{"123", "456", "7"}},
		{"qwen2 punctuation keeps newlines", preQwen2, "x;\n\ny", []string{"x", ";\n\n", "y"}},
		{"qwen2 spaces then newline", preQwen2, "  \n  x", []string{"  \n", " ", " x"}},
		{"qwen2 tab before letters", preQwen2, "\tfoo", []string{"\tfoo"}},
		{"invalid utf-8 is other", preQwen2, "a\xff\xfeb", []string{"a", "\xff\xfe", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.pre.pieces(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("split %q\n got  %q\n want %q", tt.in, got, tt.want)
			}
		})
	}
}
