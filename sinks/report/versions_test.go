package report_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"swerl/internal/testenv"
	"swerl/schemas"
	"swerl/sinks/parquetio"
	"swerl/sinks/report"
)

// writeTrainedRun writes a run's outputs with step records: one instance,
// one group of 3 samples sampled by version 0 (the oracle's answer, a
// wrong one whose text would be markup if not escaped, a malformed one),
// trained by version 1.
func writeTrainedRun(t *testing.T, dir string) {
	code := map[string]string{"pkg/a.go": "package pkg\n\nfunc A() int {\n\treturn 1\n}\n"}
	oracle := map[string]string{"pkg/a.go": "package pkg\n\nfunc A() int {\n\treturn 11\n}\n"}
	in := schemas.Instance{SchemaVersion: 1, ID: "acme/app#7", Repo: "acme/app", PRNumber: 7, MergeCommit: "m7", PRTitle: "fix A",
		CodeContext: code, OracleNewContent: oracle, OraclePatch: "diff --git a/pkg/a.go b/pkg/a.go\n"}
	must(t, parquetio.WriteFile(filepath.Join(dir, "instances", "instances-000000.parquet"), []schemas.Instance{in}))
	ans := func(r string) string {
		return "<think>x</think><solution>```go\n### pkg/a.go\n<<<<<<< SEARCH\n\treturn 1\n=======\n" + r + "\n>>>>>>> REPLACE\n```</solution>"
	}
	var samples []schemas.Sample
	for i, c := range []string{ans("\treturn 11"), ans("\treturn 12 // <script>alert(1)</script>"), "<b>no tags</b>"} {
		var s schemas.Sample
		s.SchemaVersion, s.ID, s.GroupID, s.InstanceID, s.GroupSize, s.Index = 1, fmt.Sprintf("g7/%d", i), "g7", "acme/app#7", 3, i
		s.Completion, s.Reward, s.Advantage, s.Prompt, s.Repo, s.FinishReason = c, []float64{1, 0.5, -1}[i], []float64{1, 0, -1}[i], "p", "acme/app", "stop"
		if i == 2 {
			s.FormatError = "count of <think> is not 1"
		}
		s.CreatedAt = "2026-01-01T00:00:00Z"
		samples = append(samples, s)
	}
	must(t, parquetio.WriteFile(filepath.Join(dir, "samples", "samples-000000.parquet"), samples))
	must(t, os.MkdirAll(filepath.Join(dir, "trained"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "trained", "v000001.json"), []byte(`{"version":1,"step":1,"samples":["g7/0","g7/1","g7/2"],"sft_next":0}`), 0o644))
	must(t, parquetio.WriteFile(filepath.Join(dir, "index.parquet"), []schemas.WeightVersion{{SchemaVersion: 1, Version: 0, Parent: -1}, {SchemaVersion: 1, Version: 1, Step: 1}}))
}

// The report links each trained version to a page with its answers next to
// the oracle patches, rewards and advantages, every text escaped.
func TestReportVersionPages(t *testing.T) {
	dir := t.TempDir()
	writeTrainedRun(t, dir)
	page, err := report.Write(dir)
	must(t, err)
	index, err := os.ReadFile(page)
	must(t, err)
	if !strings.Contains(string(index), `<a href="versions/v000001.html">v1</a>`) || !strings.Contains(string(index), "<td>1</td><td>3</td>") {
		t.Fatalf("the index does not link version 1:\n%s", index)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report", "versions", "v000001.html"))
	must(t, err)
	v := string(b)
	for _, want := range []string{"What trained version 1", "PR acme/app#7: fix A", `id="g7/0"`, `id="g7/1"`, `id="g7/2"`,
		"+\treturn 11", "+\treturn 12 // &lt;script&gt;alert(1)&lt;/script&gt;", "&lt;b&gt;no tags&lt;/b&gt;",
		"format error: count of &lt;think&gt; is not 1", "reward 0.5000", `<span class="pos">+1.0000</span>`} {
		if !strings.Contains(v, want) {
			t.Errorf("the version page lacks %q", want)
		}
	}
	if strings.Contains(v, "<script>") {
		t.Fatal("an answer's markup reached the page unescaped")
	}
	if n := strings.Count(v, `<pre class="oracle">diff --git a/pkg/a.go b/pkg/a.go`); n != 3 {
		t.Fatalf("%d oracle patches next to the 3 answers", n)
	}
}

// checkVersionPage reports, from the page a browser laid out, how many
// samples it shows and whether each answer sits left of its oracle patch.
const checkVersionPage = `<!doctype html><html><body>
<iframe id="f" src="versions/v000001.html" width="1400" height="2400"></iframe><pre id="out">pending</pre>
<script>
document.getElementById('f').onload = () => {
  const d = document.getElementById('f').contentDocument;
  const samples = [...d.querySelectorAll('div.sample')];
  const sideBySide = samples.filter(s => {
    const a = s.querySelector('pre.answer').getBoundingClientRect(), o = s.querySelector('pre.oracle').getBoundingClientRect();
    return a.width > 200 && o.width > 200 && a.right <= o.left && Math.abs(a.top - o.top) < 2;
  }).length;
  document.getElementById('out').textContent = 'RESULT ' + JSON.stringify({samples: samples.length, sideBySide, scripts: d.scripts.length});
};
</script></body></html>`

// TestVersionPageRendersInChromium lays a version page out in headless
// Chromium: every sample shows its answer left of the oracle patch, and no
// answer's text became a script.
func TestVersionPageRendersInChromium(t *testing.T) {
	chromium := testenv.Tool(t, "chromium", "apt-get install -y chromium")
	dir := t.TempDir()
	writeTrainedRun(t, dir)
	_, err := report.Write(dir)
	must(t, err)
	result := checkInChromium(t, chromium, filepath.Join(dir, "report"), "check-version.html", checkVersionPage)
	var res struct{ Samples, SideBySide, Scripts int }
	must(t, json.Unmarshal(result, &res))
	if res.Samples != 3 || res.SideBySide != 3 || res.Scripts != 0 {
		t.Fatalf("browser: %+v, want 3 samples, 3 side by side, no scripts", res)
	}
}
