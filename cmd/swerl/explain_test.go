package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"swerl/gpu/learner"
	"swerl/schemas"
	"swerl/sinks/parquetio"
)

// swerl explain on a version of a real swerl run's output lists exactly the
// sample ids of the version's step record, each joined to its sample row
// and its instance (the pull request); --sample finds the version back; the
// text form names the PR and the rewards.
func TestExplainRunVersion(t *testing.T) {
	repo := runRepo(t)
	out := filepath.Join(t.TempDir(), "out")
	args := []string{"run", "--repo", repo, "--out", out, "--sft-steps", "1", "--batch", "2", "--group-size", "2",
		"--max-tokens", "200", "--eval", "0", "--metrics-addr", "", "--seed", "5", "--steps", "2"}
	var stderr bytes.Buffer
	if code := runMain(context.Background(), args, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, stderr.String())
	}
	versions, err := parquetio.ReadFile[schemas.WeightVersion](filepath.Join(out, "index.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	insts, err := parquetio.ReadDir[schemas.Instance](filepath.Join(out, "instances"))
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]schemas.Instance{}
	for _, in := range insts {
		byID[in.ID] = in
	}
	count := 0
	for _, wv := range versions {
		rec, err := learner.ReadRecord(out, wv.Version)
		if err != nil || len(rec.Samples) == 0 {
			continue // version 0 and the warm start's versions train on no samples
		}
		var stdout bytes.Buffer
		stderr.Reset()
		if code := runMain(context.Background(), []string{"explain", "--out", out, "--version", strconv.FormatInt(wv.Version, 10), "--json"}, &stdout, &stderr); code != 0 {
			t.Fatalf("explain --version %d: exit %d: %s", wv.Version, code, stderr.String())
		}
		var ids []string
		for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
			var e explained
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("%v: %s", err, line)
			}
			ids = append(ids, e.SampleID)
			in, ok := byID[e.Task]
			if e.Version != wv.Version || e.Step != wv.Step || !ok || e.Repo != in.Repo || e.PRNumber != in.PRNumber ||
				e.MergeCommit != in.MergeCommit || e.MergeCommit == "" || e.Prompt == "" || !strings.HasPrefix(e.OraclePatch, "diff --git ") ||
				e.PolicyVersion >= wv.Version || !strings.HasPrefix(e.InstanceID, in.ID) {
				t.Fatalf("version %d: %s joined to %+v (instance %+v)", wv.Version, e.SampleID, e, in)
			}
		}
		if !slices.Equal(ids, rec.Samples) {
			t.Fatalf("version %d: explain lists %v, the step record %v", wv.Version, ids, rec.Samples)
		}
		// One sample: the version that trained it, and the text form.
		var text bytes.Buffer
		if code := runMain(context.Background(), []string{"explain", "--out", out, "--sample", rec.Samples[0]}, &text, &stderr); code != 0 {
			t.Fatalf("explain --sample: exit %d: %s", code, stderr.String())
		}
		for _, want := range []string{"version " + strconv.FormatInt(wv.Version, 10) + " (learner step", "sample " + rec.Samples[0] + ": reward", "(a hunk of ", "commit "} {
			if !strings.Contains(text.String(), want) {
				t.Fatalf("explain --sample text lacks %q:\n%s", want, text.String())
			}
		}
		count++
	}
	if count != 2 {
		t.Fatalf("explained %d RL versions, want 2", count)
	}
	// swerl report: a page per RL version, linked from the index, showing
	// every sample of its record.
	var page bytes.Buffer
	if code := runMain(context.Background(), []string{"report", "--out", out}, &page, &stderr); code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr.String())
	}
	index, err := os.ReadFile(strings.TrimSpace(page.String()))
	if err != nil {
		t.Fatal(err)
	}
	for _, wv := range versions {
		rec, err := learner.ReadRecord(out, wv.Version)
		if err != nil || len(rec.Samples) == 0 {
			continue
		}
		name := fmt.Sprintf("versions/v%06d.html", wv.Version)
		if !strings.Contains(string(index), `href="`+name+`"`) {
			t.Fatalf("the report's index does not link %s", name)
		}
		b, err := os.ReadFile(filepath.Join(out, "report", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range rec.Samples {
			if !strings.Contains(string(b), `id="`+html.EscapeString(id)+`"`) {
				t.Fatalf("%s lacks sample %s", name, id)
			}
		}
		if n := strings.Count(string(b), `<pre class="oracle">diff --git`); n != len(rec.Samples) {
			t.Fatalf("%s: %d oracle patches for %d samples", name, n, len(rec.Samples))
		}
	}
	if code := runMain(context.Background(), []string{"explain", "--out", out, "--sample", "nope/0"}, &bytes.Buffer{}, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "no version trained on the sample nope/0") {
		t.Fatalf("an unknown sample: exit %d: %s", code, stderr.String())
	}
	if code := runMain(context.Background(), []string{"explain", "--out", out}, &bytes.Buffer{}, &stderr); code != 2 {
		t.Fatalf("neither --version nor --sample: exit %d", code)
	}
}
