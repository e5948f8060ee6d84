package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"swerl/internal/testenv"
)

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
