package report_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"swerl/internal/testenv"
	"swerl/schemas"
	"swerl/sinks/parquetio"
)

// runQuery runs a documented analytics query with DuckDB from dir, the
// directory that holds swerl-out/.
func runQuery(t *testing.T, dir, name string) []map[string]any {
	t.Helper()
	modules := testenv.NodeModules(t, "@duckdb/node-api")
	root := testenv.RepoRoot(t)
	src, err := os.ReadFile(filepath.Join(root, "scripts", "duckdb-query.mjs"))
	must(t, err)
	script := filepath.Join(filepath.Dir(modules), "duckdb-query.mjs")
	must(t, os.WriteFile(script, src, 0o644))
	cmd := exec.Command("node", script, filepath.Join(root, "sinks", "report", "queries", name))
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, stderr.String())
	}
	var rows []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		must(t, json.Unmarshal([]byte(line), &m))
		rows = append(rows, m)
	}
	return rows
}

func num(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case string: // DECIMAL values come back as strings
		var f float64
		fmt.Sscan(x, &f)
		return f
	}
	return math.NaN()
}

// TestAnalyticsQueries runs every documented query over a small run's
// outputs and checks the numbers against values computed here from the rows
// themselves.
func TestAnalyticsQueries(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "swerl-out")
	writeRun(t, out)
	samples, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
	must(t, err)

	type agg struct{ n, sum, fmtErr, exact float64 }
	byV := map[int64]*agg{}
	byRepo := map[string]*agg{}
	groups := map[string][]float64{}
	for _, s := range samples {
		a := byV[s.PolicyVersion]
		if a == nil {
			a = &agg{}
			byV[s.PolicyVersion] = a
		}
		a.n++
		a.sum += s.Reward
		if s.Reward == -1 {
			a.fmtErr++
		}
		if s.Reward == 1 {
			a.exact++
		}
		repo := s.InstanceID[:strings.IndexByte(s.InstanceID, '#')]
		if byRepo[repo] == nil {
			byRepo[repo] = &agg{}
		}
		byRepo[repo].n++
		byRepo[repo].sum += s.Reward
		groups[s.GroupID] = append(groups[s.GroupID], s.Reward)
	}

	rows := runQuery(t, dir, "reward_by_version.sql")
	if len(rows) != len(byV) {
		t.Fatalf("reward_by_version: %d rows, want %d", len(rows), len(byV))
	}
	for _, r := range rows {
		a := byV[int64(num(r["policy_version"]))]
		if num(r["samples"]) != a.n || math.Abs(num(r["mean_reward"])-a.sum/a.n) > 1e-6 ||
			math.Abs(num(r["format_error_rate"])-a.fmtErr/a.n) > 1e-6 || math.Abs(num(r["exact_match_rate"])-a.exact/a.n) > 1e-6 {
			t.Errorf("reward_by_version row %v; want n=%v mean=%v fmt=%v exact=%v", r, a.n, a.sum/a.n, a.fmtErr/a.n, a.exact/a.n)
		}
	}

	zero := 0
	for _, rs := range groups {
		sort.Float64s(rs)
		if rs[0] == rs[len(rs)-1] {
			zero++
		}
	}
	gotZero := 0
	for _, r := range runQuery(t, dir, "zero_variance_groups.sql") {
		gotZero += int(num(r["zero_variance_groups"]))
	}
	if gotZero != zero {
		t.Errorf("zero_variance_groups: %d, want %d", gotZero, zero)
	}

	rows = runQuery(t, dir, "reward_by_repo.sql")
	if len(rows) != len(byRepo) {
		t.Fatalf("reward_by_repo: %d rows, want %d", len(rows), len(byRepo))
	}
	for _, r := range rows {
		a := byRepo[r["repo"].(string)]
		if a == nil || num(r["samples"]) != a.n || math.Abs(num(r["mean_reward"])-a.sum/a.n) > 1e-6 {
			t.Errorf("reward_by_repo row %v", r)
		}
	}

	if rows := runQuery(t, dir, "hardest_instances.sql"); len(rows) != 4 {
		t.Errorf("hardest_instances: %d rows, want 4 (one per instance)", len(rows))
	}
	rows = runQuery(t, dir, "versions.sql")
	if len(rows) != 3 || num(rows[2]["version"]) != 3 || num(rows[2]["parent"]) != 2 {
		t.Errorf("versions: %v", rows)
	}

	// Every documented query must be exercised: these 5 here, lineage.sql
	// by sinks/lineage's TestLineageQueryAgreesWithDuckDB (it needs step
	// records).
	sqls, _ := filepath.Glob(filepath.Join(testenv.RepoRoot(t), "sinks", "report", "queries", "*.sql"))
	if len(sqls) != 6 {
		t.Errorf("%d query files; the tests check 6: extend them", len(sqls))
	}
}
