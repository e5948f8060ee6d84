package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"swerl/internal/testenv"
	"swerl/sinks/parquetio"
	"swerl/transforms/reward"
)

// conformanceFiles are the shared reward conformance corpus.
var conformanceFiles = []string{"reward_search_replace.jsonl", "reward_unidiff.jsonl"}

// eachConformanceLine calls fn with each line of a conformance file and its
// 0-based index.
func eachConformanceLine(t *testing.T, name string, fn func(i int, line []byte)) {
	t.Helper()
	f := testenv.Conformance(t, name)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for i := 0; sc.Scan(); i++ {
		fn(i, sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// rewardInput copies every n-th line of both shared conformance files into
// one JSONL file with malformed lines between them, and returns the
// expected rewards by output line (NaN for the malformed lines).
func rewardInput(t *testing.T, every int) (string, []float64, []string) {
	t.Helper()
	var buf bytes.Buffer
	var want []float64
	var ids []string
	for _, name := range conformanceFiles {
		eachConformanceLine(t, name, func(i int, line []byte) {
			if i%every != 0 {
				return
			}
			var v struct {
				ID             string  `json:"id"`
				ExpectedReward float64 `json:"expected_reward"`
			}
			if err := json.Unmarshal(line, &v); err != nil {
				t.Fatal(err)
			}
			buf.Write(line)
			buf.WriteByte('\n')
			want = append(want, v.ExpectedReward)
			ids = append(ids, name+"/"+v.ID)
		})
		// A malformed line and a record naming no mode after each file.
		buf.WriteString("{\"id\": \"broken\", \"output\": 7}\n")
		want, ids = append(want, math.NaN()), append(ids, "broken")
		buf.WriteString("{\"id\": \"nomode\"}\n\n")
		want, ids = append(want, math.NaN()), append(ids, "nomode")
	}
	path := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, want, ids
}

func TestRewardCommandMatchesConformanceInOrder(t *testing.T) {
	in, want, ids := rewardInput(t, 7)
	for _, workers := range []string{"1", "3"} {
		out := filepath.Join(t.TempDir(), "out.jsonl")
		var stderr bytes.Buffer
		if code := runMain(context.Background(), []string{"reward", "--in", in, "--out", out, "--workers", workers}, &bytes.Buffer{}, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(lines) != len(want) {
			t.Fatalf("workers %s: %d result lines for %d input records", workers, len(lines), len(want))
		}
		prevLine := int64(0)
		for i, l := range lines {
			var got reward.Scored
			if err := json.Unmarshal([]byte(l), &got); err != nil {
				t.Fatalf("result %d: %v", i, err)
			}
			if got.Line <= prevLine {
				t.Fatalf("result %d: line %d after %d: output order not kept", i, got.Line, prevLine)
			}
			prevLine = got.Line
			if !strings.HasSuffix(ids[i], "/"+got.ID) && ids[i] != got.ID {
				t.Fatalf("result %d: id %q, want %q", i, got.ID, ids[i])
			}
			if math.IsNaN(want[i]) {
				if got.Mode != "invalid" || !strings.Contains(got.Error, ":"+itoa(got.Line)+":") {
					t.Errorf("result %d: malformed line gave %+v, want an error naming line %d", i, got, got.Line)
				}
				continue
			}
			if math.Abs(got.Reward-want[i]) > 1e-9 {
				t.Errorf("%s: reward %.12f, want %.12f", ids[i], got.Reward, want[i])
			}
			if got.Reward == -1 && got.Error == "" {
				t.Errorf("%s: −1 without an error", ids[i])
			}
			if got.Reward != -1 && got.Similarities == nil && got.Reward != 1 {
				t.Errorf("%s: no similarities", ids[i])
			}
		}
		if !strings.Contains(stderr.String(), "4 malformed input lines") {
			t.Errorf("summary does not count the malformed lines: %s", stderr.String())
		}
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestRewardCommandParquetBothWays(t *testing.T) {
	in, want, _ := rewardInput(t, 50)
	// JSONL → Parquet records (the valid ones), then Parquet → Parquet.
	var recs []reward.Record
	var wantValid []float64
	b, _ := os.ReadFile(in)
	for i, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		_ = i
		if rec, err := reward.DecodeRecord([]byte(l)); err == nil {
			recs = append(recs, rec)
		}
	}
	for _, w := range want {
		if !math.IsNaN(w) {
			wantValid = append(wantValid, w)
		}
	}
	dir := t.TempDir()
	pin, pout := filepath.Join(dir, "in.parquet"), filepath.Join(dir, "out.parquet")
	if err := parquetio.WriteFile(pin, recs); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if code := runMain(context.Background(), []string{"reward", "--in", pin, "--out", pout}, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got, err := parquetio.ReadFile[reward.Scored](pout)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(wantValid) {
		t.Fatalf("%d rows, want %d", len(got), len(wantValid))
	}
	for i := range got {
		if math.Abs(got[i].Reward-wantValid[i]) > 1e-9 || got[i].Line != int64(i+1) {
			t.Errorf("row %d: %+v, want reward %v", i, got[i], wantValid[i])
		}
	}
}

func TestRewardCommandTimeout(t *testing.T) {
	// Two long, different files: the similarity is quadratic, so a 1 µs cap
	// must cut it short with a clear error instead of hanging.
	var a, c strings.Builder
	for i := range 4000 {
		a.WriteString("line " + itoa(int64(i)) + " alpha\n")
		c.WriteString("line " + itoa(int64(i*7%4000)) + " beta\n")
	}
	base := strings.Repeat("x = 1\n", 4000)
	rec := reward.Record{ID: "big", CodeContext: map[string]string{"x.py": base},
		OracleNewContent: map[string]string{"x.py": a.String()},
		Output: "<think>t</think><solution>```python\n### x.py\n<<<<<<< SEARCH\n" + strings.TrimSuffix(base, "\n") +
			"\n=======\n" + strings.TrimSuffix(c.String(), "\n") + "\n>>>>>>> REPLACE\n```</solution>"}
	line, _ := json.Marshal(rec)
	in := filepath.Join(t.TempDir(), "in.jsonl")
	os.WriteFile(in, append(line, '\n'), 0o644)
	var stdout, stderr bytes.Buffer
	if code := runMain(context.Background(), []string{"reward", "--in", in, "--timeout", "1us"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var got reward.Scored
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Reward != -1 || !strings.Contains(got.Error, "timeout") {
		t.Fatalf("got %+v, want −1 with a timeout error", got)
	}
}
