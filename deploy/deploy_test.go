package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"swerl/internal/testenv"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"
)

// ---------------------------------------------------------------------------
// Loading

// deployDir is the folder of this package: go test runs in it.
func deployDir(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(wd, "compose", "compose.yaml")); err != nil {
		t.Fatalf("deploy folder not found from %s: %v", wd, err)
	}
	return wd
}

// filesWithExt lists the files under the deploy folder with one of exts.
func filesWithExt(t *testing.T, exts ...string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(deployDir(t), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "node_modules" {
			return filepath.SkipDir
		}
		if !d.IsDir() && slices.Contains(exts, filepath.Ext(path)) {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no %v files under %s", exts, deployDir(t))
	}
	return out
}

// yamlDocs decodes every document of a YAML stream. Empty documents are
// dropped; a document that is not a mapping is an error.
func yamlDocs(data []byte) ([]map[string]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []map[string]any
	for i := 1; ; i++ {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if v == nil {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("document %d: top level is %T, not a mapping", i, v)
		}
		docs = append(docs, m)
	}
}

func loadYAML(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := yamlDocs(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return docs
}

func loadOneYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	docs := loadYAML(t, path)
	if len(docs) != 1 {
		t.Fatalf("%s: %d documents, want 1", path, len(docs))
	}
	return docs[0]
}

// Accessors over decoded YAML/JSON: a missing or mistyped step yields the
// zero value, and the checks below treat that as absent.

func mapAt(v any, keys ...string) map[string]any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	m, _ := v.(map[string]any)
	return m
}

func listAt(v any, keys ...string) []any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	l, _ := v.([]any)
	return l
}

func strAt(v any, keys ...string) string {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	switch s := v.(type) {
	case string:
		return s
	case nil:
		return ""
	default:
		return fmt.Sprint(s)
	}
}

func strList(v []any) []string {
	out := make([]string, 0, len(v))
	for _, e := range v {
		out = append(out, fmt.Sprint(e))
	}
	return out
}

// ---------------------------------------------------------------------------
// Every file parses

func TestYAMLFilesParse(t *testing.T) {
	for _, path := range filesWithExt(t, ".yaml", ".yml") {
		docs := loadYAML(t, path)
		if len(docs) == 0 {
			t.Errorf("%s: no YAML document", path)
		}
	}
}

func TestYAMLDecoderRejectsBadInput(t *testing.T) {
	// The parse check above is only worth something if these fail.
	for _, tc := range []struct{ name, in string }{
		{"duplicate key", "a: 1\na: 2\n"},
		{"bad indentation", "a:\n  b: 1\n c: 2\n"},
		{"scalar document", "just a string\n"},
		{"tab indentation", "a:\n\tb: 1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := yamlDocs([]byte(tc.in)); err == nil {
				t.Errorf("yamlDocs(%q) = nil error, want an error", tc.in)
			}
		})
	}
}

func TestJSONFilesParse(t *testing.T) {
	for _, path := range filesWithExt(t, ".json") {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if dec.More() {
			t.Errorf("%s: data after the first JSON value", path)
		}
	}
}

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

// ---------------------------------------------------------------------------
// Compose

// commandText joins a compose service's command (string or list) and the
// values of its environment mapping.
func commandText(svc any) string {
	var parts []string
	m, _ := svc.(map[string]any)
	switch c := m["command"].(type) {
	case string:
		parts = append(parts, c)
	case []any:
		parts = append(parts, strList(c)...)
	}
	for _, v := range mapAt(svc, "environment") {
		parts = append(parts, fmt.Sprint(v))
	}
	return strings.Join(parts, " ")
}

// dockerfileStages returns the stage names (FROM ... AS name) of a Dockerfile.
func dockerfileStages(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?im)^FROM\s+\S+\s+AS\s+(\S+)\s*$`)
	var stages []string
	for _, m := range re.FindAllStringSubmatch(string(data), -1) {
		stages = append(stages, m[1])
	}
	return stages
}

func TestComposeReferences(t *testing.T) {
	dir := filepath.Join(deployDir(t), "compose")
	compose := loadOneYAML(t, filepath.Join(dir, "compose.yaml"))
	services := mapAt(compose, "services")
	volumes := mapAt(compose, "volumes")
	if len(services) == 0 {
		t.Fatal("compose.yaml: no services")
	}
	for _, want := range []string{"kafka", "flink-jobmanager", "flink-taskmanager", "beam-job-server", "prometheus", "grafana", "learn", "mine", "train"} {
		if services[want] == nil {
			t.Errorf("compose.yaml: no service %s", want)
		}
	}
	hostPorts := map[string]string{}
	for name, svc := range services {
		where := "compose.yaml service " + name
		if strAt(svc, "image") == "" && mapAt(svc, "build") == nil {
			t.Errorf("%s: neither image nor build", where)
		}
		var deps []string
		if m := mapAt(svc, "depends_on"); m != nil {
			for k := range m {
				deps = append(deps, k)
			}
		} else {
			deps = strList(listAt(svc, "depends_on"))
		}
		for _, d := range deps {
			if services[d] == nil {
				t.Errorf("%s: depends on unknown service %s", where, d)
			}
		}
		if nm := strAt(svc, "network_mode"); strings.HasPrefix(nm, "service:") && services[strings.TrimPrefix(nm, "service:")] == nil {
			t.Errorf("%s: network_mode %s names an unknown service", where, nm)
		}
		for _, v := range strList(listAt(svc, "volumes")) {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") {
				if _, err := os.Stat(filepath.Join(dir, src)); err != nil {
					t.Errorf("%s: bind mount source %s: %v", where, src, err)
				}
			} else if _, ok := volumes[src]; !ok {
				t.Errorf("%s: named volume %s is not declared under volumes", where, src)
			}
		}
		if b := mapAt(svc, "build"); b != nil {
			ctx := filepath.Join(dir, strAt(b, "context"))
			df := filepath.Join(ctx, strAt(b, "dockerfile"))
			if _, err := os.Stat(filepath.Join(ctx, "go.mod")); err != nil {
				t.Errorf("%s: build context %s is not the repository root", where, ctx)
			}
			if target := strAt(b, "target"); target != "" && !slices.Contains(dockerfileStages(t, df), target) {
				t.Errorf("%s: build target %s is not a stage of %s", where, target, df)
			}
		}
		for _, p := range strList(listAt(svc, "ports")) {
			host, _, _ := strings.Cut(p, ":")
			if other, dup := hostPorts[host]; dup {
				t.Errorf("%s: host port %s already published by %s", where, host, other)
			}
			hostPorts[host] = name
		}
		if img, _, _ := strings.Cut(strAt(svc, "image"), ":"); slices.Contains([]string{"swerl", "swerl-git", "swerl-cuda"}, img) {
			checkSwerlCommand(t, where, commandText(svc))
		}
	}
}

// checkSwerlCommand checks that a swerl invocation names a real subcommand.
func checkSwerlCommand(t *testing.T, where, cmd string) {
	t.Helper()
	fields := strings.Fields(cmd)
	if len(fields) == 0 {
		t.Errorf("%s: no command", where)
		return
	}
	sub := fields[0]
	if i := slices.Index(fields, "swerl"); i >= 0 && i+1 < len(fields) {
		sub = fields[i+1]
	}
	if commands := swerlCLI(t).commands; !slices.Contains(commands, sub) {
		t.Errorf("%s: %q is not a swerl subcommand (swerl -h lists %v)", where, sub, commands)
	}
}

// ---------------------------------------------------------------------------
// Kubernetes

type k8sDoc struct {
	file string
	obj  map[string]any
}

func (d k8sDoc) kind() string { return strAt(d.obj, "kind") }
func (d k8sDoc) name() string { return strAt(d.obj, "metadata", "name") }
func (d k8sDoc) String() string {
	return fmt.Sprintf("%s: %s %s", filepath.Base(d.file), d.kind(), d.name())
}

func k8sDocs(t *testing.T) []k8sDoc {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(deployDir(t), "k8s", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no k8s manifests: %v", err)
	}
	sort.Strings(paths)
	var docs []k8sDoc
	for _, p := range paths {
		for _, obj := range loadYAML(t, p) {
			docs = append(docs, k8sDoc{p, obj})
		}
	}
	return docs
}

// podSpec returns the pod spec of a workload, or nil for other kinds.
func podSpec(d k8sDoc) (spec map[string]any, labels map[string]any) {
	switch d.kind() {
	case "Deployment", "Job", "StatefulSet", "DaemonSet":
		return mapAt(d.obj, "spec", "template", "spec"), mapAt(d.obj, "spec", "template", "metadata", "labels")
	}
	return nil, nil
}

func TestKubernetesManifests(t *testing.T) {
	docs := k8sDocs(t)
	byKind := map[string]map[string]k8sDoc{}
	for _, d := range docs {
		if byKind[d.kind()] == nil {
			byKind[d.kind()] = map[string]k8sDoc{}
		}
		if strAt(d.obj, "apiVersion") == "" || d.kind() == "" || d.name() == "" {
			t.Errorf("%s: apiVersion, kind and metadata.name are required", d)
			continue
		}
		if _, dup := byKind[d.kind()][d.name()]; dup {
			t.Errorf("%s: defined twice", d)
		}
		byKind[d.kind()][d.name()] = d
		if d.kind() != "Namespace" && strAt(d.obj, "metadata", "namespace") != "swerl" {
			t.Errorf("%s: metadata.namespace = %q, want swerl", d, strAt(d.obj, "metadata", "namespace"))
		}
	}
	if byKind["Namespace"]["swerl"].obj == nil {
		t.Error("no Namespace swerl")
	}

	// Secrets that exist once the operators ran: Strimzi makes one per
	// KafkaUser and <cluster>-cluster-ca-cert per Kafka.
	secrets := map[string]bool{}
	for name := range byKind["Secret"] {
		secrets[name] = true
	}
	for name := range byKind["KafkaUser"] {
		secrets[name] = true
	}
	for name := range byKind["Kafka"] {
		secrets[name+"-cluster-ca-cert"] = true
	}
	for _, name := range documentedSecrets(t) {
		secrets[name] = true
	}

	checkPod := func(where string, spec map[string]any) {
		vols := map[string]bool{}
		for _, v := range listAt(spec, "volumes") {
			vols[strAt(v, "name")] = true
			if c := strAt(v, "persistentVolumeClaim", "claimName"); c != "" && byKind["PersistentVolumeClaim"][c].obj == nil {
				t.Errorf("%s: volume %s: claim %s is not defined", where, strAt(v, "name"), c)
			}
			if s := strAt(v, "secret", "secretName"); s != "" && !secrets[s] {
				t.Errorf("%s: volume %s: Secret %s is neither defined nor made by Strimzi", where, strAt(v, "name"), s)
			}
		}
		for _, c := range listAt(spec, "containers") {
			cw := where + " container " + strAt(c, "name")
			for _, m := range listAt(c, "volumeMounts") {
				if !vols[strAt(m, "name")] {
					t.Errorf("%s: mounts volume %s that the pod does not define", cw, strAt(m, "name"))
				}
			}
		}
	}

	for _, d := range docs {
		spec, labels := podSpec(d)
		if spec == nil {
			continue
		}
		if d.kind() == "Deployment" {
			for k, v := range mapAt(d.obj, "spec", "selector", "matchLabels") {
				if labels[k] != v {
					t.Errorf("%s: selector %s=%v does not match the pod template's labels", d, k, v)
				}
			}
		}
		containers := listAt(spec, "containers")
		if len(containers) == 0 {
			t.Errorf("%s: no containers", d)
		}
		for _, c := range containers {
			cw := fmt.Sprintf("%s container %s", d, strAt(c, "name"))
			if strAt(c, "image") == "" {
				t.Errorf("%s: no image", cw)
			}
			if strAt(c, "resources", "requests", "memory") == "" || strAt(c, "resources", "limits", "memory") == "" {
				t.Errorf("%s: resources.requests.memory and resources.limits.memory are required", cw)
			}
		}
		checkPod(d.String(), spec)
	}

	// Services select pods and name container ports that exist.
	for _, svc := range byKind["Service"] {
		sel := mapAt(svc.obj, "spec", "selector")
		if len(sel) == 0 {
			t.Errorf("%s: no selector", svc)
			continue
		}
		var ports []string
		matched := false
		for _, d := range docs {
			spec, labels := podSpec(d)
			if spec == nil {
				continue
			}
			ok := true
			for k, v := range sel {
				ok = ok && labels[k] == v
			}
			if !ok {
				continue
			}
			matched = true
			for _, c := range listAt(spec, "containers") {
				for _, p := range listAt(c, "ports") {
					ports = append(ports, strAt(p, "name"))
				}
			}
		}
		if !matched {
			t.Errorf("%s: selector %v matches no pod template", svc, sel)
		}
		for _, p := range listAt(svc.obj, "spec", "ports") {
			tp := strAt(p, "targetPort")
			if _, err := strconv.Atoi(tp); err != nil && tp != "" && !slices.Contains(ports, tp) {
				t.Errorf("%s: targetPort %s is not a container port name of the selected pods (%v)", svc, tp, ports)
			}
		}
	}

	// The learner: one GPU, one replica, never two at once.
	learner := byKind["Deployment"]["swerl-learner"]
	if learner.obj == nil {
		t.Fatal("no Deployment swerl-learner")
	}
	if r := strAt(learner.obj, "spec", "replicas"); r != "1" {
		t.Errorf("%s: replicas %s, want 1 (a second learner forks the weight history)", learner, r)
	}
	if s := strAt(learner.obj, "spec", "strategy", "type"); s != "Recreate" {
		t.Errorf("%s: strategy %q, want Recreate", learner, s)
	}
	spec, _ := podSpec(learner)
	c := listAt(spec, "containers")[0]
	if args := strList(listAt(c, "args")); len(args) == 0 || args[0] != "learn" {
		t.Errorf("%s: args %v, want swerl learn", learner, args)
	}
	req, lim := strAt(c, "resources", "requests", "nvidia.com/gpu"), strAt(c, "resources", "limits", "nvidia.com/gpu")
	if req == "" || req != lim {
		t.Errorf("%s: nvidia.com/gpu request %q and limit %q must be set and equal", learner, req, lim)
	}
}

func TestStrimziKafka(t *testing.T) {
	docs := k8sDocs(t)
	kafkas := map[string]k8sDoc{}
	brokersPerCluster := map[string]int{}
	var topics []string
	for _, d := range docs {
		if d.kind() == "Kafka" {
			kafkas[d.name()] = d
		}
	}
	if len(kafkas) == 0 {
		t.Fatal("no Strimzi Kafka resource")
	}
	for _, d := range docs {
		if !strings.HasPrefix(strAt(d.obj, "apiVersion"), "kafka.strimzi.io/") || d.kind() == "Kafka" {
			continue
		}
		cluster := strAt(d.obj, "metadata", "labels", "strimzi.io/cluster")
		if _, ok := kafkas[cluster]; !ok {
			t.Errorf("%s: label strimzi.io/cluster=%q names no Kafka resource", d, cluster)
		}
		switch d.kind() {
		case "KafkaNodePool":
			roles := strList(listAt(d.obj, "spec", "roles"))
			if slices.Contains(roles, "broker") {
				n, _ := strconv.Atoi(strAt(d.obj, "spec", "replicas"))
				brokersPerCluster[cluster] += n
			}
			if len(listAt(d.obj, "spec", "storage", "volumes")) == 0 && strAt(d.obj, "spec", "storage", "type") == "jbod" {
				t.Errorf("%s: jbod storage without volumes", d)
			}
		case "KafkaTopic":
			topics = append(topics, d.name())
			n, _ := strconv.Atoi(strAt(d.obj, "spec", "replicas"))
			if p, _ := strconv.Atoi(strAt(d.obj, "spec", "partitions")); p < 1 || n < 1 {
				t.Errorf("%s: partitions and replicas must be at least 1", d)
			}
			if n > brokersPerCluster[cluster] && brokersPerCluster[cluster] > 0 {
				t.Errorf("%s: %d replicas but %d brokers", d, n, brokersPerCluster[cluster])
			}
		}
	}
	for _, want := range []string{"swerl.instances", "swerl.samples", "swerl.weights", "swerl.deadletter"} {
		if !slices.Contains(topics, want) {
			t.Errorf("no KafkaTopic %s (DESIGN.md's topics)", want)
		}
	}
	for name, k := range kafkas {
		ann := mapAt(k.obj, "metadata", "annotations")
		if ann["strimzi.io/kraft"] != "enabled" || ann["strimzi.io/node-pools"] != "enabled" {
			t.Errorf("%s: KRaft needs annotations strimzi.io/kraft and strimzi.io/node-pools = enabled", k)
		}
		if brokersPerCluster[name] == 0 {
			t.Errorf("%s: no KafkaNodePool with the broker role", k)
		}
		minISR, _ := strconv.Atoi(strAt(k.obj, "spec", "kafka", "config", "min.insync.replicas"))
		if minISR >= brokersPerCluster[name] && brokersPerCluster[name] > 1 {
			t.Errorf("%s: min.insync.replicas %d leaves no broker to lose out of %d", k, minISR, brokersPerCluster[name])
		}
	}

	// Secrets that exist once the operators ran (Strimzi makes one per
	// KafkaUser) and the README's kubectl commands made theirs.
	secrets := map[string]bool{}
	for _, d := range docs {
		if d.kind() == "Secret" || d.kind() == "KafkaUser" {
			secrets[d.name()] = true
		}
	}
	for _, name := range documentedSecrets(t) {
		secrets[name] = true
	}

	// Every swerl client points at a listener that exists, with its TLS and
	// SASL settings.
	for _, d := range docs {
		for _, c := range containersOf(d) {
			args := strList(listAt(c, "args"))
			for _, a := range args {
				brokers, ok := strings.CutPrefix(a, "--brokers=")
				if !ok {
					continue
				}
				where := fmt.Sprintf("%s container %s", d, strAt(c, "name"))
				host, port, _ := strings.Cut(brokers, ":")
				cluster, ok := strings.CutSuffix(host, "-kafka-bootstrap")
				k, known := kafkas[cluster]
				if !ok || !known {
					t.Errorf("%s: --brokers host %s is not <Kafka name>-kafka-bootstrap", where, host)
					continue
				}
				var listener map[string]any
				for _, l := range listAt(k.obj, "spec", "kafka", "listeners") {
					if strAt(l, "port") == port {
						listener = l.(map[string]any)
					}
				}
				if listener == nil {
					t.Errorf("%s: no listener of %s on port %s", where, cluster, port)
					continue
				}
				if (strAt(listener, "tls") == "true") != slices.Contains(args, "--kafka-tls") {
					t.Errorf("%s: listener %s tls=%s but --kafka-tls given: %v", where, strAt(listener, "name"), strAt(listener, "tls"), slices.Contains(args, "--kafka-tls"))
				}
				if auth := strAt(listener, "authentication", "type"); auth != "" && !slices.Contains(args, "--sasl-mechanism="+auth) {
					t.Errorf("%s: listener %s wants %s authentication; --sasl-mechanism=%s is missing", where, strAt(listener, "name"), auth, auth)
				}
			}
			// The SASL password and serve's API key come from environment
			// variables: the container must set them from a Secret that
			// exists.
			for _, a := range args {
				_, name, ok := strings.Cut(a, "-env=")
				if !ok || !strings.HasPrefix(a, "--sasl-password-env=") && !strings.HasPrefix(a, "--api-key-env=") {
					continue
				}
				where := fmt.Sprintf("%s container %s", d, strAt(c, "name"))
				found := false
				for _, e := range listAt(c, "env") {
					if strAt(e, "name") != name {
						continue
					}
					found = true
					sec := strAt(e, "valueFrom", "secretKeyRef", "name")
					if sec == "" || strAt(e, "valueFrom", "secretKeyRef", "key") == "" {
						t.Errorf("%s: env %s is not set from a secretKeyRef", where, name)
					} else if !secrets[sec] {
						t.Errorf("%s: env %s: Secret %s is neither defined nor made by Strimzi", where, name, sec)
					}
				}
				if !found {
					t.Errorf("%s: %s but no env entry %s", where, a, name)
				}
			}
		}
	}
}

func containersOf(d k8sDoc) []any {
	spec, _ := podSpec(d)
	return listAt(spec, "containers")
}

func TestFlinkDeployment(t *testing.T) {
	beam := beamVersion(t)
	docs := k8sDocs(t)
	var flink k8sDoc
	for _, d := range docs {
		if d.kind() == "FlinkDeployment" {
			flink = d
		}
	}
	if flink.obj == nil {
		t.Fatal("no FlinkDeployment")
	}
	for _, f := range []string{"image", "flinkVersion", "serviceAccount"} {
		if strAt(flink.obj, "spec", f) == "" {
			t.Errorf("%s: spec.%s is required", flink, f)
		}
	}
	for _, f := range []string{"jobManager", "taskManager"} {
		if strAt(flink.obj, "spec", f, "resource", "memory") == "" || strAt(flink.obj, "spec", f, "resource", "cpu") == "" {
			t.Errorf("%s: spec.%s.resource needs cpu and memory", flink, f)
		}
	}
	// flink:1.19-java11 <-> flinkVersion v1_19 <-> beam_flink1.19_job_server.
	m := regexp.MustCompile(`^flink:(\d+)\.(\d+)`).FindStringSubmatch(strAt(flink.obj, "spec", "image"))
	if m == nil {
		t.Fatalf("%s: image %q is not flink:MAJOR.MINOR...", flink, strAt(flink.obj, "spec", "image"))
	}
	minor := m[1] + "." + m[2]
	if want := "v" + m[1] + "_" + m[2]; strAt(flink.obj, "spec", "flinkVersion") != want {
		t.Errorf("%s: flinkVersion %s, want %s for image %s", flink, strAt(flink.obj, "spec", "flinkVersion"), want, strAt(flink.obj, "spec", "image"))
	}
	wantJobServer := fmt.Sprintf("apache/beam_flink%s_job_server:%s", minor, beam)
	found := false
	for _, d := range docs {
		for _, c := range containersOf(d) {
			if !strings.Contains(strAt(c, "image"), "_job_server") {
				continue
			}
			found = true
			if strAt(c, "image") != wantJobServer {
				t.Errorf("%s: job server image %s, want %s", d, strAt(c, "image"), wantJobServer)
			}
			if args := strList(listAt(c, "args")); !slices.Contains(args, "--flink-master="+flink.name()+"-rest:8081") {
				t.Errorf("%s: job server args %v lack --flink-master=%s-rest:8081", d, args, flink.name())
			}
		}
	}
	if !found {
		t.Error("no Beam Flink job server Deployment")
	}

	// The task managers carry the worker pool the Jobs' --environment_config
	// points at.
	var poolPort string
	for _, c := range listAt(flink.obj, "spec", "taskManager", "podTemplate", "spec", "containers") {
		if slices.Contains(strList(listAt(c, "args")), "--worker_pool") {
			for _, p := range listAt(c, "ports") {
				poolPort = strAt(p, "containerPort")
			}
		}
	}
	if poolPort == "" {
		t.Fatalf("%s: no --worker_pool sidecar with a containerPort in the task manager pod template", flink)
	}
	for _, d := range docs {
		for _, c := range containersOf(d) {
			for _, a := range strList(listAt(c, "args")) {
				if cfg, ok := strings.CutPrefix(a, "--environment_config="); ok && cfg != "localhost:"+poolPort {
					t.Errorf("%s: --environment_config=%s, want localhost:%s (the worker pool sidecar)", d, cfg, poolPort)
				}
			}
		}
	}
}

// ---------------------------------------------------------------------------
// Beam versions and flags

// beamVersion is the Beam Go SDK version go.mod requires, without the v.
func beamVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/apache/beam/sdks/v2 v(\S+)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod does not require github.com/apache/beam/sdks/v2")
	}
	return string(m[1])
}

func TestImagesMatchBeamVersion(t *testing.T) {
	beam := beamVersion(t)
	re := regexp.MustCompile(`(?:beam_go_sdk|beam_flink[0-9.]+_job_server):([0-9][0-9.]*)|BEAM_VERSION=([0-9][0-9.]*)`)
	seen := 0
	for _, path := range filesWithExt(t, ".yaml", ".yml", ".sh", "") {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(data), -1) {
			seen++
			if v := m[1] + m[2]; v != beam {
				t.Errorf("%s: %s names Beam %s, go.mod has %s", path, m[0], v, beam)
			}
		}
	}
	if seen == 0 {
		t.Error("no Beam image tag found in deploy/")
	}
}

// beamFlags parses the Beam Go SDK source of go.mod's version, from the
// module cache, for the flags its runners and options declare.
func beamFlags(t *testing.T) map[string]bool {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/apache/beam/sdks/v2")
	cmd.Dir = testenv.RepoRoot(t)
	out, err := cmd.Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("locating the Beam module (run go mod download): %v %s", err, out)
	}
	flags := map[string]bool{}
	fset := token.NewFileSet()
	for _, rel := range []string{
		"go/pkg/beam/runners/flag.go",
		"go/pkg/beam/options/jobopts/options.go",
		"go/pkg/beam/options/gcpopts/options.go",
		"go/pkg/beam/runners/dataflow/dataflow.go",
	} {
		f, err := parser.ParseFile(fset, filepath.Join(dir, rel), nil, 0)
		if err != nil {
			t.Fatalf("parsing the Beam source: %v", err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "flag" {
				return true
			}
			for _, a := range call.Args {
				if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if name, err := strconv.Unquote(lit.Value); err == nil {
						flags[name] = true
					}
					break
				}
			}
			return true
		})
	}
	for _, must := range []string{"runner", "endpoint", "environment_type", "project", "temp_location"} {
		if !flags[must] {
			t.Fatalf("Beam source parse found no flag %q: parser out of date with the SDK", must)
		}
	}
	return flags
}

// ---------------------------------------------------------------------------
// swerl's own CLI: the flags deploy/ passes must be the flags the binary has.

// swerlHelp is what the swerl binary says about itself: its subcommands and
// each one's flags, from `swerl -h` and `swerl <cmd> -h`.
type swerlHelp struct {
	commands []string
	flags    map[string]map[string]bool // subcommand -> flag name (no dashes)
}

var (
	cliOnce sync.Once
	cli     swerlHelp
	cliErr  error
)

var (
	helpCommandRE = regexp.MustCompile(`^  ([a-z][a-z0-9-]*)\s{2,}\S`)
	helpFlagRE    = regexp.MustCompile(`^  -([A-Za-z0-9][A-Za-z0-9_.-]*)(?:\s|$)`)
)

// parseHelpFlags returns the flag names of one `swerl <cmd> -h` output: the
// lines that start with two spaces and -name (Go's flag.PrintDefaults).
func parseHelpFlags(out string) map[string]bool {
	flags := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		if m := helpFlagRE.FindStringSubmatch(l); m != nil {
			flags[m[1]] = true
		}
	}
	return flags
}

// swerlCLI builds ./cmd/swerl once per test binary and asks it for its
// subcommands and their flags.
func swerlCLI(t *testing.T) swerlHelp {
	t.Helper()
	root := testenv.RepoRoot(t)
	cliOnce.Do(func() {
		dir, err := os.MkdirTemp("", "swerl-deploy-test-")
		if err != nil {
			cliErr = err
			return
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "swerl")
		build := exec.Command("go", "build", "-o", bin, "./cmd/swerl")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			cliErr = fmt.Errorf("go build ./cmd/swerl: %v\n%s", err, out)
			return
		}
		help := func(args ...string) (string, error) {
			out, err := exec.Command(bin, args...).CombinedOutput()
			if err != nil {
				return "", fmt.Errorf("swerl %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return string(out), nil
		}
		top, err := help("-h")
		if err != nil {
			cliErr = err
			return
		}
		_, list, _ := strings.Cut(top, "Commands:\n")
		cli.flags = map[string]map[string]bool{}
		for _, l := range strings.Split(list, "\n") {
			m := helpCommandRE.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			out, err := help(m[1], "-h")
			if err != nil {
				cliErr = err
				return
			}
			cli.commands = append(cli.commands, m[1])
			cli.flags[m[1]] = parseHelpFlags(out)
		}
		if len(cli.commands) < 5 || len(cli.flags["train"]) == 0 {
			cliErr = fmt.Errorf("swerl -h lists commands %v (train flags %d): help parsing out of date with main.go", cli.commands, len(cli.flags["train"]))
		}
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cli
}

// invocation is one swerl command line found in deploy/.
type invocation struct {
	where string // file and object
	sub   string // subcommand
	flags []string
}

var flagRE = regexp.MustCompile(`(?:^|[\s"'(])--([a-z][a-z0-9_.-]*)`)

// shellFlags returns the --flags of shell or YAML text, without # comments.
func shellFlags(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		for _, m := range flagRE.FindAllStringSubmatch(l, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// argFlags returns the flag names of an argument list: --name or --name=v.
func argFlags(args []string) []string {
	var out []string
	for _, a := range args {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			out = append(out, name)
		}
	}
	return out
}

// shellArrays maps each bash array assigned in text (name=( … ) and
// name+=( … )) to the --flags written inside it.
func shellArrays(text string) map[string][]string {
	arrays := map[string][]string{}
	start := regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\+?=\(`)
	cur := ""
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if m := start.FindStringSubmatch(l); m != nil {
			cur = m[1]
			l = l[len(m[0]):]
			arrays[cur] = append(arrays[cur], []string{}...)
		}
		if cur == "" {
			continue
		}
		body, closed := l, false
		if i := strings.LastIndex(l, ")"); i >= 0 && !strings.Contains(l[i:], "\"") && (strings.TrimSpace(l[i+1:]) == "" || strings.HasPrefix(strings.TrimSpace(l[i+1:]), "#")) {
			body, closed = l[:i], true
		}
		arrays[cur] = append(arrays[cur], shellFlags(" "+body)...)
		if closed {
			cur = ""
		}
	}
	return arrays
}

// swerlInvocations finds every swerl command line in deploy/: compose
// services of a swerl image, k8s containers whose args start with a
// subcommand, the Dataflow scripts (with the arrays of common.sh they
// expand), and `swerl <cmd> …` lines in README.md's code blocks.
func swerlInvocations(t *testing.T, commands []string) []invocation {
	t.Helper()
	dir := deployDir(t)
	var invs []invocation

	compose := loadOneYAML(t, filepath.Join(dir, "compose", "compose.yaml"))
	for name, svc := range mapAt(compose, "services") {
		if img, _, _ := strings.Cut(strAt(svc, "image"), ":"); !slices.Contains([]string{"swerl", "swerl-git", "swerl-cuda"}, img) {
			continue
		}
		text := commandText(svc)
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		sub := fields[0]
		if i := slices.Index(fields, "swerl"); i >= 0 && i+1 < len(fields) {
			sub = fields[i+1]
		}
		invs = append(invs, invocation{"compose/compose.yaml service " + name, sub, shellFlags(text)})
	}

	for _, d := range k8sDocs(t) {
		for _, c := range containersOf(d) {
			args := strList(listAt(c, "args"))
			if len(args) > 0 && slices.Contains(commands, args[0]) && strings.Contains(strAt(c, "image"), "swerl") {
				invs = append(invs, invocation{fmt.Sprintf("k8s/%s container %s", d, strAt(c, "name")), args[0], argFlags(args)})
			}
		}
	}

	read := func(rel string) string {
		data, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	common := shellArrays(read("dataflow/common.sh"))
	if len(common) == 0 {
		t.Error("dataflow/common.sh: no flag arrays found: extraction broken")
	}
	execRE := regexp.MustCompile(`exec "\$\{SWERL:-swerl\}" ([a-z]+)`)
	useRE := regexp.MustCompile(`"\$\{([A-Za-z_][A-Za-z0-9_]*)\[@\]\}"`)
	scripts, _ := filepath.Glob(filepath.Join(dir, "dataflow", "*.sh"))
	for _, path := range scripts {
		rel := "dataflow/" + filepath.Base(path)
		text := read(rel)
		m := execRE.FindStringSubmatch(text)
		if m == nil {
			continue // common.sh: sourced, not a command
		}
		if !strings.Contains(text, "common.sh") {
			t.Errorf("%s does not source common.sh", rel)
		}
		_, cmdline, _ := strings.Cut(text, m[0])
		flags := shellFlags(cmdline)
		for _, u := range useRE.FindAllStringSubmatch(cmdline, -1) {
			arr, ok := common[u[1]]
			if !ok {
				t.Errorf("%s: expands ${%s[@]}, which common.sh does not define", rel, u[1])
			}
			flags = append(flags, arr...)
		}
		invs = append(invs, invocation{rel, m[1], flags})
	}

	invs = append(invs, readmeInvocations("README.md", read("README.md"))...)
	return invs
}

// readmeInvocations returns the `swerl <cmd> …` lines inside the fenced code
// blocks of a Markdown text, with backslash continuations joined and
// trailing # comments dropped.
func readmeInvocations(name, text string) []invocation {
	var invs []invocation
	inFence := false
	lineRE := regexp.MustCompile(`^\s*(?:\$\s+)?(?:exec\s+)?(?:\S*/)?swerl ([a-z]+)\b(.*)`)
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inFence = !inFence
			continue
		}
		if !inFence {
			continue
		}
		n := i
		for strings.HasSuffix(l, "\\") && i+1 < len(lines) {
			i++
			l = strings.TrimSuffix(l, "\\") + " " + lines[i]
		}
		if m := lineRE.FindStringSubmatch(l); m != nil {
			rest, _, _ := strings.Cut(m[2], " #")
			invs = append(invs, invocation{fmt.Sprintf("%s:%d", name, n+1), m[1], shellFlags(rest)})
		}
	}
	return invs
}

func TestHelpParsing(t *testing.T) {
	// The flag check is only worth something if the help parser finds what
	// flag.PrintDefaults writes, and nothing else.
	out := "Usage: swerl x [flags]\n\nFlags:\n  -brokers string\n    \tKafka -not-a-flag here\n  -v\talso log\n  -kafka-tls\n    \tuse TLS\n"
	got := parseHelpFlags(out)
	want := map[string]bool{"brokers": true, "v": true, "kafka-tls": true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseHelpFlags = %v, want %v", got, want)
	}
	arrays := shellArrays("a=(\n  --x=1\n  --y=\"$Y\" # c\n)\nif z; then\n  a+=(--z --w)\nfi\nb=(--q)\n")
	if want := map[string][]string{"a": {"x", "y", "z", "w"}, "b": {"q"}}; !reflect.DeepEqual(arrays, want) {
		t.Errorf("shellArrays = %v, want %v", arrays, want)
	}
	md := "swerl mine --repo x\n```sh\nkubectl -n swerl create configmap x\nswerl learn --brokers=k:1 \\\n  --model m  # --not-this\n./bin/swerl serve --addr=:1\n```\n"
	got2 := readmeInvocations("R.md", md)
	want2 := []invocation{{"R.md:4", "learn", []string{"brokers", "model"}}, {"R.md:6", "serve", []string{"addr"}}}
	if !reflect.DeepEqual(got2, want2) {
		t.Errorf("readmeInvocations = %+v, want %+v", got2, want2)
	}
}

func TestSwerlInvocationFlags(t *testing.T) {
	cli := swerlCLI(t)
	beam := beamFlags(t)
	invs := swerlInvocations(t, cli.commands)
	checked := 0
	seen := map[string]bool{}
	for _, inv := range invs {
		known, ok := cli.flags[inv.sub]
		if !ok {
			t.Errorf("%s: %q is not a swerl subcommand (swerl -h lists %v)", inv.where, inv.sub, cli.commands)
			continue
		}
		seen[inv.sub] = true
		for _, f := range inv.flags {
			checked++
			if !known[f] && !beam[f] {
				t.Errorf("%s: swerl %s has no flag --%s (not in `swerl %s -h`, not a Beam Go SDK flag)", inv.where, inv.sub, f, inv.sub)
			}
		}
		if (inv.sub == "mine" || inv.sub == "train") && !strings.HasPrefix(inv.where, "README") && !slices.Contains(inv.flags, "runner") {
			t.Errorf("%s: swerl %s without --runner", inv.where, inv.sub)
		}
	}
	for _, want := range []string{"mine", "train", "learn", "serve"} {
		if !seen[want] {
			t.Errorf("no swerl %s invocation found in deploy/: extraction broken", want)
		}
	}
	if checked < 40 {
		t.Errorf("only %d flags found in %d invocations: extraction broken", checked, len(invs))
	}
}

// ---------------------------------------------------------------------------
// Dockerfile

func TestDockerfile(t *testing.T) {
	root := testenv.RepoRoot(t)
	path := filepath.Join(deployDir(t), "Dockerfile")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goDirective := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	goArg := regexp.MustCompile(`(?m)^ARG GO_VERSION=(\S+)`).FindStringSubmatch(text)
	if goDirective == nil || goArg == nil || !strings.HasPrefix(goArg[1], string(goDirective[1])) {
		t.Errorf("%s: ARG GO_VERSION %v does not match go.mod's go %s", path, goArg, goDirective)
	}

	stages := dockerfileStages(t, path)
	for _, want := range []string{"build", "harness", "swerl-git", "cuda", "swerl"} {
		if !slices.Contains(stages, want) {
			t.Errorf("%s: no stage %s (stages %v)", path, want, stages)
		}
	}
	// docker build without --target builds the last stage: the distroless one.
	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(text, -1)
	if last := froms[len(froms)-1][1]; !strings.HasPrefix(last, "gcr.io/distroless/") {
		t.Errorf("%s: default (last) stage is %s, want distroless", path, last)
	}
	// The Beam runners stage the running binary as the worker only when it
	// is linux/amd64; distroless static needs no cgo.
	if !strings.Contains(text, "CGO_ENABLED=0 GOOS=linux GOARCH=amd64") {
		t.Errorf("%s: the default build must be CGO_ENABLED=0 GOOS=linux GOARCH=amd64", path)
	}
	for _, m := range regexp.MustCompile(`--from=(\S+)`).FindAllStringSubmatch(text, -1) {
		if !slices.Contains(stages, m[1]) {
			t.Errorf("%s: COPY --from=%s names no earlier stage", path, m[1])
		}
	}
	builds := regexp.MustCompile(`go build [^\n]* (\./\S+)`).FindAllStringSubmatch(text, -1)
	if len(builds) == 0 {
		t.Errorf("%s: no go build of a package", path)
	}
	for _, m := range builds {
		if _, err := os.Stat(filepath.Join(root, m[1])); err != nil {
			t.Errorf("%s: builds %s: %v", path, m[1], err)
		}
	}
}

// documentedSecrets are the Secrets deploy/README.md tells the operator to
// make ("kubectl -n swerl create secret generic NAME ...").
func documentedSecrets(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`kubectl -n swerl create secret generic ([a-z0-9-]+)`).FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

// containerLists returns every "containers" list under v (pod specs of
// workloads and of Flink's pod templates alike).
func containerLists(v any) [][]any {
	var out [][]any
	switch x := v.(type) {
	case map[string]any:
		if cs, ok := x["containers"].([]any); ok {
			out = append(out, cs)
		}
		for _, e := range x {
			out = append(out, containerLists(e)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, containerLists(e)...)
		}
	}
	return out
}

// swerl serve answers on every interface in compose and Kubernetes, so it
// must require an API key (--api-key-env), read from a secret, never from
// the manifest; the Beam worker pool, where train's HTTP policy runs, must
// get SWERL_API_KEY from the same secret, or every rollout is a 401.
func TestServeRequiresAPIKey(t *testing.T) {
	dir := deployDir(t)
	keyFlag := func(args []string) (string, bool) {
		public := false
		name := ""
		for _, a := range args {
			if strings.HasPrefix(a, "--addr=0.0.0.0:") || strings.HasPrefix(a, "--addr=:") {
				public = true
			}
			if n, ok := strings.CutPrefix(a, "--api-key-env="); ok {
				name = n
			}
		}
		return name, public
	}

	// Compose: the key is the secret file, read by the shell into the
	// variable the flag names.
	compose := loadOneYAML(t, filepath.Join(dir, "compose", "compose.yaml"))
	services := mapAt(compose, "services")
	if file := strAt(compose, "secrets", "swerl-api-key", "file"); file == "" {
		t.Fatal("compose.yaml: no secret swerl-api-key read from a file")
	}
	readsSecret := func(svc any, variable string) bool {
		cmd := strings.ReplaceAll(commandText(svc), "$$", "$") // compose's escape of $
		return slices.Contains(strList(listAt(svc, "secrets")), "swerl-api-key") &&
			strings.Contains(cmd, variable+"=$(cat /run/secrets/swerl-api-key)") && strings.Contains(cmd, "export "+variable)
	}
	servesSeen := 0
	for name, svc := range services {
		args := strings.Fields(commandText(svc))
		if i := slices.Index(args, "swerl"); i < 0 || i+1 >= len(args) || args[i+1] != "serve" {
			continue
		}
		servesSeen++
		v, public := keyFlag(args)
		if public && v == "" {
			t.Errorf("compose service %s: serve listens on every interface without --api-key-env", name)
		}
		if v != "" && !readsSecret(svc, v) {
			t.Errorf("compose service %s: --api-key-env=%s, but %s is not read from the secret swerl-api-key", name, v, v)
		}
	}
	if servesSeen == 0 {
		t.Error("compose.yaml: no swerl serve service")
	}
	if !readsSecret(services["beam-worker-pool"], "SWERL_API_KEY") {
		t.Error("compose service beam-worker-pool: SWERL_API_KEY (train's HTTP policy) is not read from the secret swerl-api-key")
	}

	// Kubernetes: the variable comes from a secretKeyRef (checked to
	// exist by TestStrimziKafka); the worker pool uses the same Secret.
	serveSecrets, workerSecrets := map[string]bool{}, map[string]bool{}
	envSecret := func(c any, variable string) string {
		for _, e := range listAt(c, "env") {
			if strAt(e, "name") == variable {
				return strAt(e, "valueFrom", "secretKeyRef", "name")
			}
		}
		return ""
	}
	for _, d := range k8sDocs(t) {
		for _, cs := range containerLists(d.obj) {
			for _, c := range cs {
				where := fmt.Sprintf("%s container %s", d, strAt(c, "name"))
				args := strList(listAt(c, "args"))
				if len(args) > 0 && args[0] == "serve" {
					v, public := keyFlag(args)
					if public && v == "" {
						t.Errorf("%s: serve listens on every interface without --api-key-env", where)
					}
					if sec := envSecret(c, v); v != "" && sec == "" {
						t.Errorf("%s: --api-key-env=%s, but %s is not set from a secretKeyRef", where, v, v)
					} else if sec != "" {
						serveSecrets[sec] = true
					}
					if p := strAt(c, "readinessProbe", "httpGet", "path"); v != "" && p != "" && p != "/health" {
						t.Errorf("%s: readiness probe on %s, which needs the API key (only /health is open)", where, p)
					}
				}
				if slices.Contains(args, "--worker_pool") {
					if sec := envSecret(c, "SWERL_API_KEY"); sec == "" {
						t.Errorf("%s: no SWERL_API_KEY from a secretKeyRef for train's HTTP policy", where)
					} else {
						workerSecrets[sec] = true
					}
				}
			}
		}
	}
	if len(serveSecrets) == 0 || !maps.Equal(serveSecrets, workerSecrets) {
		t.Errorf("serve's API key from Secrets %v, the worker pool's from %v: want one, the same", serveSecrets, workerSecrets)
	}
}
