package reward

import (
	"bufio"
	"context"
	"encoding/json"
	"maps"
	"math"
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
	f := testenv.Conformance(t, name)
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

// A Task shared by every vector of the same instance (code context and
// oracle) gives each answer the reference's reward and exactly what
// SearchReplace gives, on the first scoring and on the memoized second.
func TestConformanceTask(t *testing.T) {
	lines := readConformance(t, "reward_search_replace.jsonl")
	tasks := map[string]*Task{}
	score := func(l conformanceLine) Result {
		key, err := json.Marshal([]map[string]string{l.CodeContext, l.OracleNewContent})
		if err != nil {
			t.Fatal(err)
		}
		task := tasks[string(key)]
		if task == nil {
			task = NewTask(l.CodeContext, l.OracleNewContent)
			tasks[string(key)] = task
		}
		return task.Score(context.Background(), l.Output)
	}
	// Other vectors' answers against each instance: the oracle's diff,
	// computed by the first of them that gets that far, serves the rest.
	for i, l := range lines {
		task := NewTask(l.CodeContext, l.OracleNewContent)
		for j := i; j < min(i+4, len(lines)); j++ {
			got := task.Score(context.Background(), lines[j].Output)
			want := SearchReplace(context.Background(), l.CodeContext, l.OracleNewContent, lines[j].Output)
			if got.Reward != want.Reward || got.Error != want.Error || !maps.Equal(got.Similarities, want.Similarities) {
				t.Fatalf("%s scored against %s: Task gives %+v, SearchReplace %+v", lines[j].ID, l.ID, got, want)
			}
		}
	}
	for pass := range 2 {
		for i := range lines {
			l := lines[i]
			if pass == 1 {
				l = lines[len(lines)-1-i]
			}
			got := score(l)
			want := SearchReplace(context.Background(), l.CodeContext, l.OracleNewContent, l.Output)
			if math.Abs(got.Reward-l.ExpectedReward) > 1e-9 || got.Reward != want.Reward || got.Error != want.Error || !maps.Equal(got.Similarities, want.Similarities) {
				t.Fatalf("pass %d, %s (%s): Task gives %+v, SearchReplace %+v, reference %.12f", pass, l.ID, l.Kind, got, want, l.ExpectedReward)
			}
		}
	}
	t.Logf("%d vectors over %d instances", len(lines), len(tasks))
}

// A memoized result's similarities are the caller's own: changing them does
// not change the next answer's.
func TestTaskMemoIsNotShared(t *testing.T) {
	code := map[string]string{"a.py": "x = 1\n"}
	task := NewTask(code, map[string]string{"a.py": "x = 2\n"})
	out := "<think>t</think>\n<solution>\n```python\n### a.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n```\n</solution>"
	first := task.Score(context.Background(), out)
	if first.Reward != 1 || first.Similarities["a.py"] != 1 {
		t.Fatalf("first score %+v", first)
	}
	first.Similarities["a.py"] = -5
	if again := task.Score(context.Background(), out); again.Similarities["a.py"] != 1 {
		t.Fatalf("memo shared its map: %+v", again)
	}
	// A canceled context is reported, and not remembered.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	other := NewTask(code, map[string]string{"a.py": "x = 2\n"})
	if r := other.Score(ctx, out); r.Reward != -1 || r.Error == "" {
		t.Fatalf("canceled score %+v", r)
	}
	if r := other.Score(context.Background(), out); r.Reward != 1 {
		t.Fatalf("after a canceled score: %+v", r)
	}
}
