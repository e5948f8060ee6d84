package report_test

import (
	"bytes"
	"errors"
	"fmt"
	"image/png"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"swerl/schemas"
	"swerl/sinks/parquetio"
	"swerl/sinks/report"
)

// writeRun writes a small run: 3 versions × 4 groups × 4 samples over 2
// repositories, rewards improving with the version, plus a checkpoint index.
func writeRun(t testing.TB, dir string) (meanByVersion []float64) {
	t.Helper()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var samples []schemas.Sample
	var insts []schemas.Instance
	var versions []schemas.WeightVersion
	for v := range 3 {
		var sum float64
		for g := range 4 {
			repo := []string{"acme/a", "acme/b"}[g%2]
			id := fmt.Sprintf("%s#%d", repo, g)
			if v == 0 {
				insts = append(insts, schemas.Instance{SchemaVersion: 1, ID: id, Repo: repo, OracleNewContent: map[string]string{"x": "y"}})
			}
			for k := range 4 {
				var s schemas.Sample
				s.SchemaVersion, s.InstanceID, s.PolicyVersion = 1, id, int64(v)
				s.GroupID = fmt.Sprintf("%s@v%d", id, v)
				s.Reward = -1
				if k <= v {
					s.Reward = 0.25 * float64(k+v)
				}
				if s.Reward == -1 {
					s.FormatError = "no <solution>"
				}
				s.GroupStd = 0.5
				s.Advantage = float64(k) - 1.5
				s.CreatedAt = t0.Add(time.Duration(v*60+g*10+k) * time.Second).Format(time.RFC3339Nano)
				samples = append(samples, s)
				sum += s.Reward
			}
		}
		meanByVersion = append(meanByVersion, sum/16)
		versions = append(versions, schemas.WeightVersion{SchemaVersion: 1, Version: int64(v + 1), Parent: int64(v),
			CreatedAt: t0.Add(time.Duration(v*60+50) * time.Second).Format(time.RFC3339Nano)})
	}
	must(t, parquetio.WriteFile(filepath.Join(dir, "samples", "samples-000000.parquet"), samples[:20]))
	must(t, parquetio.WriteFile(filepath.Join(dir, "samples", "samples-000001.parquet"), samples[20:]))
	must(t, parquetio.WriteFile(filepath.Join(dir, "instances", "instances-000000.parquet"), insts))
	must(t, parquetio.WriteFile(filepath.Join(dir, "index.parquet"), versions))
	return meanByVersion
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestFiguresFromRun(t *testing.T) {
	dir := t.TempDir()
	want := writeRun(t, dir)
	d, err := report.Load(dir)
	must(t, err)
	if len(d.Samples) != 48 || len(d.Instances) != 4 || len(d.Versions) != 3 || len(d.Missing) != 0 {
		t.Fatalf("loaded %d samples, %d instances, %d versions, missing %v", len(d.Samples), len(d.Instances), len(d.Versions), d.Missing)
	}
	figs := report.Figures(d)
	byName := map[string]report.Figure{}
	for _, f := range figs {
		byName[f.Name] = f
	}
	r := byName["reward"].Chart.Series[0]
	for i := range want {
		if r.X[i] != float64(i) || math.Abs(r.Y[i]-want[i]) > 1e-12 {
			t.Fatalf("reward by version %d: got (%v, %v), want (%d, %v)", i, r.X[i], r.Y[i], i, want[i])
		}
	}
	// The trailing mean (16 samples a version, so the mean of the version
	// means) and the caption's halves: version 0 against versions 1 and 2.
	tr := byName["reward"].Chart.Series[1].Y
	for i := range want {
		var m float64
		for _, w := range want[:i+1] {
			m += w / float64(i+1)
		}
		if math.Abs(tr[i]-m) > 1e-12 {
			t.Fatalf("trailing mean at v%d = %v, want %v", i, tr[i], m)
		}
	}
	halves := fmt.Sprintf("Samples of versions 0–0 average %+.3f; of versions 1–2, %+.3f.", want[0], (want[1]+want[2])/2)
	if c := byName["reward"].Caption; !strings.Contains(c, halves) {
		t.Fatalf("reward caption %q lacks %q", c, halves)
	}
	fe := byName["format_errors"].Chart.Series[0].Y
	for v, wantRate := range []float64{0.75, 0.5, 0.25} {
		if math.Abs(fe[v]-wantRate) > 1e-12 {
			t.Fatalf("format-error rate v%d = %v, want %v", v, fe[v], wantRate)
		}
	}
	// Version 0 samples are created at 0..33s, before version 1 is published
	// (50s): staleness 0. Version 1 samples (60..93s) come after version 1 was
	// published, so they are 0 behind.
	st := byName["staleness"].Chart.Series[0].Y
	if st[0] != 0 || st[1] != 0 {
		t.Fatalf("staleness %v, want 0 for v0 and v1", st)
	}
	if pr := byName["per_repo"].Chart; len(pr.Categories) != 2 || pr.Categories[0] != "acme/a" {
		t.Fatalf("per-repo categories %v", pr.Categories)
	}
}

func TestWritePageAndPNGs(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, dir)
	page, err := report.Write(dir)
	must(t, err)
	b, err := os.ReadFile(page)
	must(t, err)
	html := string(b)
	if n := strings.Count(html, "<svg"); n != 6 {
		t.Fatalf("%d inline plots, want 6", n)
	}
	if regexp.MustCompile(`(?i)<(script|link)[^>]+(src|href)="http`).MatchString(html) {
		t.Fatal("page loads external assets; it must be self-contained")
	}
	if !strings.Contains(html, "<th>samples</th><td>48</td>") {
		t.Fatal("summary lacks the sample count")
	}
	for _, name := range []string{"reward", "format_errors", "advantage", "staleness", "throughput", "per_repo"} {
		pb, err := os.ReadFile(filepath.Join(dir, "report", name+".png"))
		must(t, err)
		if _, err := png.Decode(bytes.NewReader(pb)); err != nil {
			t.Fatalf("%s.png: %v", name, err)
		}
	}
}

// A directory with no run output is an error naming what was looked for,
// not an empty report; nothing is written there.
func TestWriteWithNothingFails(t *testing.T) {
	dir := t.TempDir()
	_, err := report.Write(dir)
	if !errors.Is(err, report.ErrNoRunOutput) {
		t.Fatalf("got %v, want ErrNoRunOutput", err)
	}
	for _, want := range []string{dir, "samples", "instances", "index.parquet"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if _, statErr := os.Stat(filepath.Join(dir, "report")); !errors.Is(statErr, fs.ErrNotExist) {
		t.Errorf("a report directory was written: %v", statErr)
	}
	if _, err := report.Write(filepath.Join(dir, "absent")); err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("missing directory: got %v", err)
	}
}

// A run with only some outputs gets a page that says which are missing.
func TestWriteWithSomeSaysWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	must(t, parquetio.WriteFile(filepath.Join(dir, "instances", "instances-000000.parquet"),
		[]schemas.Instance{{SchemaVersion: schemas.Version, ID: "a/b#1", Repo: "a/b"}}))
	page, err := report.Write(dir)
	must(t, err)
	b, _ := os.ReadFile(page)
	if c := strings.Count(string(b), `class="missing"`); c != 2 {
		t.Fatalf("%d missing-input notes, want 2", c)
	}
}
