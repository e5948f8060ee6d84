// Package traintest makes inputs for tests and benchmarks of the train
// pipeline: SWE-RL instances with a few files and an oracle edit, and a
// completions file for the file: policy whose answers score differently
// (the verified oracle answer, a wrong but well-formed edit, a malformed
// answer).
package traintest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"swerl/schemas"
	"swerl/transforms/prompt"
)

// Instance returns instance number i: a small repository of three files
// whose oracle change fixes a bug in one of them (and, for odd i, touches a
// second file too).
func Instance(i int) schemas.Instance {
	mod := fmt.Sprintf("pkg%d/calc.py", i)
	helper := fmt.Sprintf("pkg%d/helper.py", i)
	readme := "README.md"
	calc := fmt.Sprintf("import helper\n\n\ndef add(a, b):\n    # version %d\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n", i)
	help := fmt.Sprintf("def clamp(x):\n    return max(0, x)\n\n\nLIMIT = %d\n", 10+i)
	in := schemas.Instance{
		SchemaVersion: schemas.Version,
		ID:            fmt.Sprintf("octo/calc%d#%d", i%3, 100+i),
		Repo:          fmt.Sprintf("octo/calc%d", i%3), PRNumber: 100 + i,
		ProblemStatement: fmt.Sprintf("add() subtracts instead of adding (report %d)", i),
		CodeContext:      map[string]string{mod: calc, helper: help, readme: "# calc\n"},
		OracleNewContent: map[string]string{mod: strings.Replace(calc, "return a - b", "return a + b", 1)},
		RelevantFiles:    []string{readme},
		Language:         "python", Source: schemas.SourceGit,
	}
	if i%2 == 1 {
		in.OracleNewContent[helper] = strings.Replace(help, "max(0, x)", "min(max(0, x), LIMIT)", 1)
	}
	return in
}

// Completions returns g answers for in. Index 0 is the oracle answer, then
// they cycle through a wrong edit, a malformed answer and the oracle again.
// When allBad is true every answer is malformed (a zero-variance group).
func Completions(in schemas.Instance, g int, allBad bool) ([]string, error) {
	oracle, err := prompt.OracleAnswer(&in, in.CodeContext)
	if err != nil {
		return nil, err
	}
	var mod string
	for _, p := range schemas.SortedPaths(in.OracleNewContent) {
		if strings.HasSuffix(p, "calc.py") {
			mod = p
		}
	}
	wrong := "<think>\nmultiplication looks off\n</think>\n<solution>\n" +
		prompt.FormatEdit(prompt.Edit{Path: mod, Search: "    return a * b", Replace: "    return a * b * 1"}) + "\n</solution>"
	malformed := "I would change add() to return a + b."
	cycle := []string{oracle, wrong, malformed}
	out := make([]string, g)
	for j := range out {
		switch {
		case allBad:
			out[j] = malformed
		default:
			out[j] = cycle[j%len(cycle)]
		}
	}
	return out, nil
}

// Set is a generated input set.
type Set struct {
	Instances   []schemas.Instance
	Completions map[string][]string // by instance id
	// InstancesPath is a JSONL file of the instances, CompletionsPath the
	// file: policy's JSONL.
	InstancesPath, CompletionsPath string
}

// New is Write for a test or benchmark: an error fails tb.
func New(tb testing.TB, dir string, n, g int, bad map[int]string) *Set {
	tb.Helper()
	s, err := Write(dir, n, g, bad)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// Write makes n instances with g completions each under dir. Every instance
// whose number is a multiple of 5 gets only malformed answers. bad lines
// (not instances) are inserted at the given 0-based line positions.
func Write(dir string, n, g int, bad map[int]string) (*Set, error) {
	s := &Set{Completions: map[string][]string{},
		InstancesPath: filepath.Join(dir, "instances.jsonl"), CompletionsPath: filepath.Join(dir, "completions.jsonl")}
	fi, err := os.Create(s.InstancesPath)
	if err != nil {
		return nil, err
	}
	defer fi.Close()
	fc, err := os.Create(s.CompletionsPath)
	if err != nil {
		return nil, err
	}
	defer fc.Close()
	wi, wc := bufio.NewWriter(fi), bufio.NewWriter(fc)
	line := 0
	// badLines writes the bad lines due at the current line.
	badLines := func() {
		for b, ok := bad[line]; ok; b, ok = bad[line] {
			fmt.Fprintln(wi, b)
			line++
		}
	}
	for i := 0; i < n; i++ {
		badLines()
		in := Instance(i)
		c, err := Completions(in, g, i%5 == 0)
		if err != nil {
			return nil, err
		}
		v, err := schemas.Encode(&in)
		if err != nil {
			return nil, err
		}
		wi.Write(append(v, '\n'))
		line++
		cl, _ := json.Marshal(map[string]any{"instance_id": in.ID, "completions": c})
		wc.Write(append(cl, '\n'))
		s.Instances = append(s.Instances, in)
		s.Completions[in.ID] = c
	}
	badLines()
	if err := wi.Flush(); err != nil {
		return nil, err
	}
	return s, wc.Flush()
}
