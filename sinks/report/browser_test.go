package report_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"swerl/internal/testenv"
	"swerl/sinks/report"
)

// checkPage loads the report in a frame and records, for the test to read
// from the dumped DOM, how many plots the browser laid out with drawn marks
// and the decoded width of each PNG copy.
const checkPage = `<!doctype html><html><body>
<iframe id="f" src="index.html" width="1400" height="2400"></iframe><pre id="out">pending</pre>
<script>
const names = ["reward","format_errors","advantage","staleness","throughput","per_repo"];
document.getElementById('f').onload = async () => {
  const d = document.getElementById('f').contentDocument;
  const svgs = [...d.querySelectorAll('svg.chart')];
  const rendered = svgs.filter(s => {
    const r = s.getBoundingClientRect();
    const marks = [...s.querySelectorAll('circle,rect,line')].filter(e => { const b = e.getBBox(); return b.width > 0 || b.height > 0; });
    return r.width >= 600 && r.height >= 300 && marks.length > 5;
  }).length;
  const widths = await Promise.all(names.map(n => new Promise(res => {
    const i = new Image(); i.onload = () => res(i.naturalWidth); i.onerror = () => res(0); i.src = n + '.png';
  })));
  document.getElementById('out').textContent = 'RESULT ' + JSON.stringify({svgs: svgs.length, rendered, widths});
};
</script></body></html>`

// TestReportRendersInChromium opens the report in headless Chromium (Debian's
// package) over a loopback HTTP server and checks every plot renders.
func TestReportRendersInChromium(t *testing.T) {
	chromium := testenv.Tool(t, "chromium", "apt-get install -y chromium")
	dir := t.TempDir()
	writeRun(t, dir)
	if _, err := report.Write(dir); err != nil {
		t.Fatal(err)
	}
	result := checkInChromium(t, chromium, filepath.Join(dir, "report"), "check.html", checkPage)
	var res struct {
		SVGs, Rendered int
		Widths         []int
	}
	if err := json.Unmarshal(result, &res); err != nil {
		t.Fatal(err)
	}
	if res.SVGs != 6 || res.Rendered != 6 {
		t.Fatalf("browser laid out %d of %d plots with marks, want 6 of 6", res.Rendered, res.SVGs)
	}
	for i, w := range res.Widths {
		if w != 640 {
			t.Fatalf("PNG %d decoded to width %d in the browser, want 640", i, w)
		}
	}
}

// checkInChromium writes page into the report folder dir as name, opens it
// in headless Chromium over a loopback HTTP server, and returns the JSON
// the page prints after "RESULT " once its checks have run.
func checkInChromium(t *testing.T, chromium, dir, name, page string) []byte {
	t.Helper()
	must(t, os.WriteFile(filepath.Join(dir, name), []byte(page), 0o644))
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=10000", "--dump-dom", srv.URL+"/"+name)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`RESULT (\{.*?\})`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("check page did not finish; DOM:\n%.2000s", out)
	}
	return m[1]
}
