package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// ---------------------------------------------------------------------------
// Metrics: the README table is the list the dashboard and rules may use.

type metricInfo struct {
	typ    string
	labels []string
}

var metricRowRE = regexp.MustCompile("^\\| `(swerl_[a-z0-9_]+)` \\| (counter|gauge|histogram|summary) \\|([^|]*)\\|")

func metricTable(t *testing.T) map[string]metricInfo {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(deployDir(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	table := map[string]metricInfo{}
	labelRE := regexp.MustCompile("`([a-z_]+)`")
	for i, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| `swerl_") {
			continue
		}
		m := metricRowRE.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("README.md:%d: metric row not in the form | `name` | type | labels |: %s", i+1, line)
			continue
		}
		if _, dup := table[m[1]]; dup {
			t.Errorf("README.md:%d: metric %s listed twice", i+1, m[1])
		}
		var labels []string
		for _, l := range labelRE.FindAllStringSubmatch(m[3], -1) {
			labels = append(labels, l[1])
		}
		table[m[1]] = metricInfo{typ: m[2], labels: labels}
	}
	if len(table) == 0 {
		t.Fatal("README.md: no metric table rows")
	}
	return table
}

func TestMetricTableNames(t *testing.T) {
	for name, info := range metricTable(t) {
		if info.typ == "counter" && !strings.HasSuffix(name, "_total") {
			t.Errorf("counter %s does not end in _total", name)
		}
		if info.typ != "counter" && strings.HasSuffix(name, "_total") {
			t.Errorf("%s %s ends in _total, which Prometheus reserves for counters", info.typ, name)
		}
	}
}

var (
	metricRefRE = regexp.MustCompile(`\bswerl_[a-z0-9_]+\b`)
	groupingRE  = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
)

// promLabels are the labels Prometheus itself puts on every series, plus
// the histogram bucket label.
var promLabels = []string{"job", "instance", "le"}

// checkExpr reports the problems of one PromQL expression against the
// metric table, and returns the table metrics it uses.
func checkExpr(table map[string]metricInfo, expr string) (used []string, problems []string) {
	labels := slices.Clone(promLabels)
	for _, ref := range metricRefRE.FindAllString(expr, -1) {
		name := ref
		if _, ok := table[name]; !ok {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				base := strings.TrimSuffix(ref, suffix)
				if base != ref && table[base].typ == "histogram" {
					name = base
					break
				}
			}
		}
		info, ok := table[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("metric %s is not in README.md's table", ref))
			continue
		}
		used = append(used, name)
		labels = append(labels, info.labels...)
	}
	for _, g := range groupingRE.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !slices.Contains(labels, l) {
				problems = append(problems, fmt.Sprintf("label %q is not a label of the metrics used", l))
			}
		}
	}
	return used, problems
}

func TestCheckExprCatchesMistakes(t *testing.T) {
	table := map[string]metricInfo{
		"swerl_a_total": {typ: "counter", labels: []string{"reason"}},
		"swerl_h":       {typ: "histogram"},
	}
	for _, tc := range []struct {
		name, expr string
		wantBad    bool
	}{
		{"known counter", `sum by (reason) (rate(swerl_a_total[5m]))`, false},
		{"histogram bucket", `histogram_quantile(0.9, sum by (le) (rate(swerl_h_bucket[5m])))`, false},
		{"unknown metric", `rate(swerl_b_total[5m])`, true},
		{"bucket of a counter", `rate(swerl_a_total_bucket[5m])`, true},
		{"unknown label", `sum by (topic) (rate(swerl_a_total[5m]))`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, problems := checkExpr(table, tc.expr)
			if got := len(problems) > 0; got != tc.wantBad {
				t.Errorf("checkExpr(%q) problems = %v, want problems: %v", tc.expr, problems, tc.wantBad)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Grafana dashboard

type panel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Datasource  *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

func TestDashboard(t *testing.T) {
	dir := deployDir(t)
	table := metricTable(t)
	ds := loadOneYAML(t, filepath.Join(dir, "compose/grafana/provisioning/datasources/prometheus.yaml"))
	sources := listAt(ds, "datasources")
	if len(sources) != 1 {
		t.Fatalf("provisioned datasources: %d, want 1", len(sources))
	}
	dsUID := strAt(sources[0], "uid")

	path := filepath.Join(dir, "grafana", "swerl-dashboard.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID           string  `json:"uid"`
		Title         string  `json:"title"`
		SchemaVersion int     `json:"schemaVersion"`
		Panels        []panel `json:"panels"`
		Templating    struct {
			List []struct {
				Name    string `json:"name"`
				Type    string `json:"type"`
				Query   string `json:"query"`
				Current struct {
					Value string `json:"value"`
				} `json:"current"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if dash.UID == "" || dash.Title == "" || dash.SchemaVersion == 0 {
		t.Errorf("%s: uid %q, title %q, schemaVersion %d: all are required", path, dash.UID, dash.Title, dash.SchemaVersion)
	}
	// Panels use a datasource variable so the dashboard imports into any
	// Grafana; it defaults to the datasource the compose stack provisions.
	wantDS := ""
	for _, v := range dash.Templating.List {
		if v.Type == "datasource" && v.Query == "prometheus" {
			wantDS = "${" + v.Name + "}"
			if v.Current.Value != dsUID {
				t.Errorf("%s: datasource variable %s defaults to %q, want the provisioned uid %q", path, v.Name, v.Current.Value, dsUID)
			}
		}
	}
	if wantDS == "" {
		t.Errorf("%s: no Prometheus datasource variable", path)
	}
	var all []panel
	var flatten func([]panel)
	flatten = func(ps []panel) {
		for _, p := range ps {
			all = append(all, p)
			flatten(p.Panels)
		}
	}
	flatten(dash.Panels)

	ids := map[int]bool{}
	used := map[string]bool{}
	for _, p := range all {
		where := fmt.Sprintf("%s: panel %d %q", path, p.ID, p.Title)
		if ids[p.ID] {
			t.Errorf("%s: duplicate panel id", where)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("%s: gridPos %+v outside Grafana's 24-column grid", where, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != wantDS {
			t.Errorf("%s: datasource %+v, want prometheus %q", where, p.Datasource, wantDS)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no targets", where)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("%s target %s: empty expr", where, tg.RefID)
				continue
			}
			refs, problems := checkExpr(table, tg.Expr)
			for _, pr := range problems {
				t.Errorf("%s target %s: %s in %s", where, tg.RefID, pr, tg.Expr)
			}
			if len(refs) == 0 && !strings.Contains(tg.Expr, "up{") {
				t.Errorf("%s target %s: uses no swerl metric: %s", where, tg.RefID, tg.Expr)
			}
			for _, r := range refs {
				used[r] = true
			}
		}
	}
	for name := range table {
		if !used[name] {
			t.Errorf("metric %s is in README.md's table but on no dashboard panel", name)
		}
	}

	// Panels must not overlap on the grid (Grafana would shuffle them).
	for i, a := range dash.Panels {
		for _, b := range dash.Panels[i+1:] {
			ga, gb := a.GridPos, b.GridPos
			if ga.X < gb.X+gb.W && gb.X < ga.X+ga.W && ga.Y < gb.Y+gb.H && gb.Y < ga.Y+ga.H {
				t.Errorf("%s: panels %d and %d overlap: %+v %+v", path, a.ID, b.ID, ga, gb)
			}
		}
	}
}

// ---------------------------------------------------------------------------
// Prometheus

func TestPrometheusRules(t *testing.T) {
	dir := deployDir(t)
	table := metricTable(t)
	rules := loadOneYAML(t, filepath.Join(dir, "prometheus", "rules.yml"))
	groups := listAt(rules, "groups")
	if len(groups) == 0 {
		t.Fatal("rules.yml: no groups")
	}
	alerts := 0
	for _, g := range groups {
		for _, r := range listAt(g, "rules") {
			name := strAt(r, "record") + strAt(r, "alert")
			expr := strAt(r, "expr")
			if expr == "" {
				t.Errorf("rules.yml: rule %s has no expr", name)
			}
			_, problems := checkExpr(table, expr)
			for _, p := range problems {
				t.Errorf("rules.yml: rule %s: %s", name, p)
			}
			if rec := strAt(r, "record"); rec != "" && !strings.HasPrefix(rec, "swerl:") {
				t.Errorf("rules.yml: recording rule %s: want the level:metric:operation form starting swerl:", rec)
			}
			if strAt(r, "alert") != "" {
				alerts++
				if strAt(r, "labels", "severity") == "" || strAt(r, "annotations", "summary") == "" {
					t.Errorf("rules.yml: alert %s needs labels.severity and annotations.summary", name)
				}
			}
		}
	}
	if alerts == 0 {
		t.Error("rules.yml: no alerting rule")
	}

	// The PrometheusRule for the operator must carry the same groups.
	pr := loadOneYAML(t, filepath.Join(dir, "k8s", "71-prometheusrule.yaml"))
	if got := listAt(pr, "spec", "groups"); !reflect.DeepEqual(got, groups) {
		t.Errorf("k8s/71-prometheusrule.yaml spec.groups differ from prometheus/rules.yml groups: copy them over")
	}
}

func TestPrometheusScrapeTargetsAreComposeServices(t *testing.T) {
	dir := deployDir(t)
	compose := loadOneYAML(t, filepath.Join(dir, "compose", "compose.yaml"))
	services := mapAt(compose, "services")
	cfg := loadOneYAML(t, filepath.Join(dir, "prometheus", "prometheus.yml"))
	for _, sc := range listAt(cfg, "scrape_configs") {
		job := strAt(sc, "job_name")
		for _, st := range listAt(sc, "static_configs") {
			for _, target := range strList(listAt(st, "targets")) {
				host, port, ok := strings.Cut(target, ":")
				if !ok {
					t.Errorf("prometheus.yml job %s: target %q has no port", job, target)
					continue
				}
				if host == "localhost" {
					continue
				}
				svc, ok := services[host]
				if !ok {
					t.Errorf("prometheus.yml job %s: target host %s is not a compose service", job, host)
					continue
				}
				// A swerl process must serve metrics on the scraped port.
				if cmd := commandText(svc); strings.Contains(cmd, "--metrics-addr") &&
					!strings.Contains(cmd, "--metrics-addr=0.0.0.0:"+port) {
					t.Errorf("prometheus.yml job %s scrapes %s, but the service's --metrics-addr is another port", job, target)
				}
			}
		}
	}
}
