package deploy

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"swerl/internal/testenv"
)

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
