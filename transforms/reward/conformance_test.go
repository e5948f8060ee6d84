package reward

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"swerl/internal/testenv"
)

// conformanceLine is one line of the shared reward vectors, scored by the
// reference Python implementation.
type conformanceLine struct {
	ID               string            `json:"id"`
	Kind             string            `json:"kind"`
	CodeContext      map[string]string `json:"code_context"`
	OracleNewContent map[string]string `json:"oracle_new_content"`
	Output           string            `json:"output"`
	OraclePatches    []string          `json:"oracle_patches"`
	PredPatches      []string          `json:"pred_patches"`
	ExpectedReward   float64           `json:"expected_reward"`
}

func readConformance(t testing.TB, name string) []conformanceLine {
	t.Helper()
	path := filepath.Join(testenv.SharedDir(t), "conformance", name)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []conformanceLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		var l conformanceLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s:%d: %v", name, n, err)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no vectors", name)
	}
	return out
}

func TestConformanceSearchReplace(t *testing.T) {
	lines := readConformance(t, "reward_search_replace.jsonl")
	bad := 0
	for _, l := range lines {
		got := SearchReplace(context.Background(), l.CodeContext, l.OracleNewContent, l.Output)
		if math.Abs(got.Reward-l.ExpectedReward) > 1e-9 {
			bad++
			if bad <= 10 {
				t.Errorf("%s (%s): reward %.12f, want %.12f (error %q, sims %v)", l.ID, l.Kind, got.Reward, l.ExpectedReward, got.Error, got.Similarities)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d search/replace vectors differ", bad, len(lines))
	}
}

func TestConformanceUnidiff(t *testing.T) {
	lines := readConformance(t, "reward_unidiff.jsonl")
	bad := 0
	for _, l := range lines {
		got := Unidiff(context.Background(), l.OraclePatches, l.PredPatches)
		if math.Abs(got.Reward-l.ExpectedReward) > 1e-9 {
			bad++
			if bad <= 10 {
				t.Errorf("%s: reward %.12f, want %.12f (sims %v)", l.ID, got.Reward, l.ExpectedReward, got.Similarities)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d unidiff vectors differ", bad, len(lines))
	}
}

// BenchmarkConformance scores every shared vector once per iteration (both
// modes), without the JSON decoding.
func BenchmarkConformance(b *testing.B) {
	sr := readConformance(b, "reward_search_replace.jsonl")
	ud := readConformance(b, "reward_unidiff.jsonl")
	b.ResetTimer()
	for range b.N {
		for _, l := range sr {
			SearchReplace(context.Background(), l.CodeContext, l.OracleNewContent, l.Output)
		}
		for _, l := range ud {
			Unidiff(context.Background(), l.OraclePatches, l.PredPatches)
		}
	}
}
