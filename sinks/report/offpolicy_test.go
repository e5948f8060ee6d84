package report_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"swerl/sinks/report"
)

// The step records' off-policy statistics become one figure, in version
// order; steps without the sampler's log-probs are left out of it.
func TestOffPolicyFigure(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, dir)
	must(t, os.MkdirAll(filepath.Join(dir, "trained"), 0o755))
	for name, body := range map[string]string{
		"v000002.json": `{"version":2,"step":2,"sft_next":0,"rollout_kl":0.02,"is_weight_max":3.5,"is_truncated_frac":0.1,"ppo_clipped_frac":0,"entropy":1.5,"rollout_tokens":40}`,
		"v000001.json": `{"version":1,"step":1,"sft_next":0,"rollout_kl":0.01,"is_weight_max":1.5,"is_truncated_frac":0,"ppo_clipped_frac":0,"entropy":1.7,"rollout_tokens":30}`,
		"v000003.json": `{"version":3,"step":3,"sft_next":0,"rollout_tokens":0}`,
	} {
		must(t, os.WriteFile(filepath.Join(dir, "trained", name), []byte(body), 0o644))
	}
	d, err := report.Load(dir)
	must(t, err)
	var found bool
	for _, f := range report.Figures(d) {
		if f.Name != "off_policy" {
			continue
		}
		found = true
		kl := f.Chart.Series[0]
		if len(kl.X) != 2 || kl.X[0] != 1 || kl.X[1] != 2 || kl.Y[0] != 0.01 || kl.Y[1] != 0.02 {
			t.Errorf("rollout KL series %v %v, want versions [1 2] at [0.01 0.02]", kl.X, kl.Y)
		}
		if w := f.Chart.Series[1]; w.Y[1] != 3.5 {
			t.Errorf("max weight series %v", w.Y)
		}
	}
	if !found {
		t.Fatal("no off_policy figure")
	}
	must(t, os.WriteFile(filepath.Join(dir, "trained", "v000004.json"), []byte(`{"version":`), 0o644))
	if _, err := report.Load(dir); err == nil || !strings.Contains(err.Error(), "v000004.json") {
		t.Errorf("a truncated step record: err = %v, want one naming it", err)
	}
}
