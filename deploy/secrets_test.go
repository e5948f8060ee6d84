package deploy

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// ---------------------------------------------------------------------------
// Secrets: swerl serve's API key in compose and Kubernetes

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
