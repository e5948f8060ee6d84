package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

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
