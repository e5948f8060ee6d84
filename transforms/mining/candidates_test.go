package mining

import (
	"reflect"
	"testing"
)

func TestListDirsImportedPackagesThenOwnDirs(t *testing.T) {
	modified := []string{"b/x.go", "a/y.go", "b/z.go"}
	imports := [][]string{{"lib/", "b/"}, {"a/helper.py"}, {"lib/", "util/"}}
	got := ListDirs(modified, imports)
	want := []string{"lib", "b", "util", "a"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ListDirs = %q, want %q", got, want)
	}
}

func TestCandidatePathsOrderAndRules(t *testing.T) {
	src := CandidateSources{
		Modified: []string{"pkg/a.go", "pkg/b.py"},
		Imports: [][]string{
			{"lib/"},                    // a Go package: its files but not its tests
			{"pkg/util.py", "pkg/a.go"}, // a modified file is never a candidate
		},
		Files: map[string][]string{
			"lib": {"lib/l.go", "lib/l_test.go", "lib/README.md"},
			"pkg": {"pkg/a.go", "pkg/b.py", "pkg/c.go", "pkg/util.py"},
		},
		Issue:  "crash in helpers.py and in lib/l_test.go",
		Budget: 10,
	}
	got := CandidatePaths(src)
	want := []string{
		"lib/l.go",       // imported package, less its test and its non-code file
		"pkg/util.py",    // imported file
		"helpers.py",     // named by the issue
		"pkg/helpers.py", // the bare name beside the modified files
		"lib/l_test.go",  // named: a test is a candidate when the issue names it
		"pkg/c.go",       // sibling; util.py came already
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("CandidatePaths =\n %q\nwant\n %q", got, want)
	}
}

func TestCandidatePathsBudget(t *testing.T) {
	src := CandidateSources{
		Modified: []string{"a.go"},
		Files:    map[string][]string{".": {"a.go", "b.go", "c.go", "d.go"}},
		Budget:   2,
	}
	if got, want := CandidatePaths(src), []string{"b.go", "c.go"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("CandidatePaths = %q, want %q", got, want)
	}
	src.Budget = 0
	if got := CandidatePaths(src); len(got) != 0 {
		t.Fatalf("a zero budget gave %q", got)
	}
}
