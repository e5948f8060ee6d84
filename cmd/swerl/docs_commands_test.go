package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"swerl/internal/testenv"
)

// docCommand is one swerl command line found in a fenced sh block.
type docCommand struct {
	file string // relative to the repository root
	line int
	args []string // after "swerl" (or "go run ./cmd/swerl")
	subs bool     // a word held a $(…) or $VAR substitution
}

// docCommands extracts every swerl command from the ```sh blocks of the
// README, docs/*.md and deploy/README.md: continuation lines joined,
// comments dropped, each command of a list (&, &&, |, ;) on its own.
func docCommands(t *testing.T, root string) []docCommand {
	t.Helper()
	files := []string{"README.md", "deploy/README.md"}
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, p := range pages {
		files = append(files, "docs/"+filepath.Base(p))
	}
	var out []docCommand
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		in := false
		var block strings.Builder
		start := 0
		for i, l := range strings.Split(string(data), "\n") {
			switch {
			case !in && (strings.HasPrefix(l, "```sh") || strings.HasPrefix(l, "```bash")):
				in, start = true, i+2
				block.Reset()
			case in && strings.HasPrefix(l, "```"):
				in = false
				out = append(out, shellCommands(f, start, block.String())...)
			case in:
				block.WriteString(l + "\n")
			}
		}
	}
	return out
}

// shellCommands splits a block of shell into commands and keeps the swerl
// ones. It knows quotes, backslash continuations, comments and the list
// operators: enough for documentation, not a shell.
func shellCommands(file string, firstLine int, src string) []docCommand {
	var cmds []docCommand
	var words []string
	var word strings.Builder
	inWord, subs, line, cmdLine := false, false, firstLine, firstLine
	flushWord := func() {
		if inWord {
			words = append(words, word.String())
		}
		word.Reset()
		inWord = false
	}
	flushCmd := func() {
		flushWord()
		args, ok := swerlArgs(words)
		if ok {
			cmds = append(cmds, docCommand{file: file, line: cmdLine, args: args, subs: subs})
		}
		words, subs = nil, false
	}
	r := []rune(src)
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case c == '\\' && i+1 < len(r) && r[i+1] == '\n':
			i++
			line++
		case c == '\n':
			flushCmd()
			line++
			cmdLine = line
		case c == '#' && !inWord:
			for i+1 < len(r) && r[i+1] != '\n' {
				i++
			}
		case c == ' ' || c == '\t':
			flushWord()
		case c == '&' || c == '|' || c == ';':
			flushCmd()
			for i+1 < len(r) && (r[i+1] == '&' || r[i+1] == '|') {
				i++
			}
			cmdLine = line
		case c == '\'':
			inWord = true
			for i++; i < len(r) && r[i] != '\''; i++ {
				word.WriteRune(r[i])
			}
		case c == '"':
			inWord = true
			for i++; i < len(r) && r[i] != '"'; i++ {
				if r[i] == '$' {
					subs = true
				}
				word.WriteRune(r[i])
			}
		default:
			if c == '$' {
				subs = true
			}
			inWord = true
			word.WriteRune(c)
		}
	}
	flushCmd()
	return cmds
}

// swerlArgs returns the arguments of a swerl command line, after any
// VAR=value assignments: "swerl ARGS" or "go run ./cmd/swerl ARGS".
func swerlArgs(words []string) ([]string, bool) {
	for len(words) > 0 && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(words[0]) {
		words = words[1:]
	}
	switch {
	case len(words) >= 2 && words[0] == "swerl":
		return words[1:], true
	case len(words) >= 4 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/swerl":
		return words[3:], true
	}
	return nil, false
}

// commandFlags returns the flag set a command defines, by running it with
// -h and keeping the set newFlags made last; nested commands (model
// import) take their own words first.
func commandFlags(t *testing.T, args []string) (*flag.FlagSet, []string) {
	t.Helper()
	var fs *flag.FlagSet
	newFlagsHook = func(f *flag.FlagSet) { fs = f }
	defer func() { newFlagsHook = nil }()
	name := []string{args[0]}
	rest := args[1:]
	for len(rest) > 0 && !strings.HasPrefix(rest[0], "-") && args[0] == "model" && len(name) == 1 {
		name, rest = append(name, rest[0]), rest[1:]
	}
	var se bytes.Buffer
	if code := runMain(context.Background(), append(append([]string{}, name...), "-h"), io.Discard, &se); code != 0 {
		t.Fatalf("swerl %s -h: exit %d: %s", strings.Join(name, " "), code, se.String())
	}
	if fs == nil {
		t.Fatalf("swerl %s made no flag set", strings.Join(name, " "))
	}
	return fs, rest
}

// TestDocsCommandsRunAsWritten checks every swerl command the README and
// docs/ show in a shell block: the command exists and every flag it is
// given is one it defines, with a value it accepts. The commands a new
// user runs first (importing a GGUF model, serving a model directory or
// an output root) are run for real, as written, on a fixture: the GGUF
// file gguf's tests ship, and an output root one SFT step on the
// built-in model writes. The rest need data a test cannot hold (SWE-bench
// rows, clones, a run of 57 versions) or are the whole loop, which the
// run tests drive.
func TestDocsCommandsRunAsWritten(t *testing.T) {
	root := testenv.RepoRoot(t)
	cmds := docCommands(t, root)
	if len(cmds) < 8 {
		t.Fatalf("found %d swerl commands in the docs' shell blocks, expected at least 8: is the extraction broken?", len(cmds))
	}
	for _, c := range cmds {
		where := c.file + ":" + strconv.Itoa(c.line) + ": swerl " + strings.Join(c.args, " ")
		if _, ok := commands[c.args[0]]; !ok {
			t.Errorf("%s: no command %q", where, c.args[0])
			continue
		}
		fs, rest := commandFlags(t, c.args)
		fs.SetOutput(io.Discard)
		if err := fs.Parse(rest); err != nil && !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s: %v", where, err)
		}
	}

	dir := t.TempDir()
	t.Chdir(dir)
	gguf := filepath.Join(root, "gpu", "gguf", "testdata", "tiny.gguf")
	fixtureOut(t, dir)
	ran := 0
	for _, c := range cmds {
		where := c.file + ":" + strconv.Itoa(c.line) + ": swerl " + strings.Join(c.args, " ")
		args := append([]string{}, c.args...)
		switch {
		case len(args) >= 2 && args[0] == "model" && args[1] == "import":
			for i, a := range args {
				if strings.HasSuffix(a, ".gguf") {
					args[i] = gguf // the doc's file comes from a pip package
				}
			}
			var se bytes.Buffer
			if code := runMain(context.Background(), args, io.Discard, &se); code != 0 {
				t.Errorf("%s: exit %d: %s", where, code, se.String())
			}
			ran++
		case args[0] == "serve":
			for i := 1; i < len(args); i++ {
				if args[i-1] == "--addr" {
					args[i] = "127.0.0.1:0" // the doc's fixed port may be taken
				}
			}
			if !containsFlag(args, "--addr") {
				args = append(args, "--addr", "127.0.0.1:0")
			}
			runDocServe(t, where, args)
			ran++
		}
	}
	t.Logf("%d swerl commands in the docs' shell blocks parse; %d of them ran on the fixture", len(cmds), ran)
	if ran < 3 {
		t.Errorf("ran %d of the docs' commands for real, expected the model import and two serve lines", ran)
	}
}

func containsFlag(args []string, f string) bool {
	for _, a := range args {
		if a == f || strings.HasPrefix(a, f+"=") {
			return true
		}
	}
	return false
}

// fixtureOut writes ./swerl-out: the built-in model after one SFT step,
// an output root with an index and two versions.
func fixtureOut(t *testing.T, dir string) {
	t.Helper()
	model := tinyModel(t, dir)
	pairs := filepath.Join(dir, "pairs.jsonl")
	if err := os.WriteFile(pairs, []byte(`{"prompt":"say hi","answer":"hello"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var se bytes.Buffer
	args := []string{"sft", "--model", model, "--pairs", pairs, "--out", "swerl-out", "--steps", "1", "--batch", "1", "--max-seq", "64", "--metrics-addr", ""}
	if code := runMain(context.Background(), args, io.Discard, &se); code != 0 {
		t.Fatalf("fixture: sft exit %d: %s", code, se.String())
	}
}

// runDocServe starts a serve line, waits for the line announcing its
// address, then interrupts it: it must exit 0.
func runDocServe(t *testing.T, where string, args []string) {
	t.Helper()
	p := startInProcess(t, args...)
	r := serveReady
	r.limit = 2 * time.Minute
	if _, err := p.readyErr(r); err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	if code, err := p.stop(time.Minute); err != nil || code != 0 {
		t.Errorf("%s: exit %d after the interrupt (%v): %s", where, code, err, p.out.String())
	}
}
