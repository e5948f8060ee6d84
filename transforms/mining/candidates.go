package mining

import (
	"path"
	"sort"
	"strings"
)

// The candidate rules say which files at the base a miner reads before
// Rank scores them. They touch no repository: the miner lists the
// directories ListDirs names, gives their files back in a
// CandidateSources, and reads the blobs CandidatePaths returns.

// ListDirs returns the directories whose files the candidate rules look
// at, each once: the package directories the modified files import (Go
// import targets, which end in "/"), then the modified files' own
// directories, sorted. imports[i] holds the import targets of modified[i].
func ListDirs(modified []string, imports [][]string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(d string) {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	for _, targets := range imports {
		for _, d := range importedDirs(targets) {
			add(d)
		}
	}
	for _, d := range ownDirs(modified) {
		add(d)
	}
	return out
}

// CandidateSources is what the candidate rules choose from.
type CandidateSources struct {
	// Modified lists the modified files' paths, sorted.
	Modified []string
	// Imports[i] holds the import targets of Modified[i], as
	// ImportTargets returns them.
	Imports [][]string
	// Files maps each directory ListDirs named to the files in it at the
	// base (no subdirectories, symlinks or gitlinks), in tree order. A
	// directory absent at the base maps to nothing.
	Files map[string][]string
	// Issue is the problem statement.
	Issue string
	// Budget caps the paths returned (RelevantConfig.Candidates).
	Budget int
}

// CandidatePaths returns the files to read as relevant-file candidates,
// best evidence first: what the modified files import (all files but
// tests of an imported Go package), then the files the issue names, then
// the modified files' siblings. Each path comes once; modified files and
// files that are not code never come; at most Budget paths come.
func CandidatePaths(src CandidateSources) []string {
	c := candidateList{budget: src.Budget, seen: map[string]bool{}}
	for _, p := range src.Modified {
		c.seen[p] = true // never a candidate of its own change
	}
	c.add(importedFiles(src))
	c.add(namedFiles(src.Issue, ownDirs(src.Modified)))
	c.add(siblingFiles(src))
	return c.paths
}

// candidateList collects paths in order, each once, up to a budget.
type candidateList struct {
	budget int
	seen   map[string]bool
	paths  []string
}

func (c *candidateList) add(ps []string) {
	for _, p := range ps {
		if len(c.paths) >= c.budget {
			return
		}
		if !c.seen[p] && IsCode(p) {
			c.seen[p] = true
			c.paths = append(c.paths, p)
		}
	}
}

// importedFiles lists the import targets of each modified file in order,
// a package directory replaced by its files less its tests.
func importedFiles(src CandidateSources) []string {
	var out []string
	for _, targets := range src.Imports {
		for _, t := range targets {
			dir, isDir := strings.CutSuffix(t, "/")
			if !isDir {
				out = append(out, t)
				continue
			}
			for _, f := range src.Files[dir] {
				if !strings.HasSuffix(f, "_test.go") {
					out = append(out, f)
				}
			}
		}
	}
	return out
}

// namedFiles lists the paths the issue names. A bare file name ("utils.py")
// is also looked for beside each modified file, in dirs.
func namedFiles(issue string, dirs []string) []string {
	var out []string
	for _, n := range NamedPaths(issue) {
		out = append(out, n)
		if !strings.Contains(n, "/") {
			for _, d := range dirs {
				out = append(out, path.Join(d, n))
			}
		}
	}
	return out
}

// siblingFiles lists the files of each modified file's directory.
func siblingFiles(src CandidateSources) []string {
	var out []string
	for _, d := range ownDirs(src.Modified) {
		out = append(out, src.Files[d]...)
	}
	return out
}

// importedDirs returns the package directories among import targets.
func importedDirs(targets []string) []string {
	var out []string
	for _, t := range targets {
		if dir, ok := strings.CutSuffix(t, "/"); ok {
			out = append(out, dir)
		}
	}
	return out
}

// ownDirs returns the directories of paths, each once, sorted.
func ownDirs(paths []string) []string {
	set := map[string]bool{}
	for _, p := range paths {
		set[path.Dir(p)] = true
	}
	out := make([]string, 0, len(set))
	for d := range set {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}
