package main

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"

	"swerl/internal/testenv"
)

// readmeMaxLines keeps the README a first page for users: what swerl does,
// the two commands, the dataflow, the commands and links; the rest lives in
// docs/.
const readmeMaxLines = 160

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestReadmeIsAFirstPage checks that the README stays short, links every
// page under docs/, that every relative link of the README and of docs/
// reaches a file (and, for a link into a Markdown page, a heading of it),
// and that its commands table names exactly the commands swerl registers.
func TestReadmeIsAFirstPage(t *testing.T) {
	root := testenv.RepoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to a docs/ page", n, readmeMaxLines)
	}

	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md pages (%v)", err)
	}
	linked := map[string]bool{}
	for _, m := range mdLink.FindAllStringSubmatch(string(readme), -1) {
		linked[strings.SplitN(m[1], "#", 2)[0]] = true
	}
	for _, p := range pages {
		rel := "docs/" + filepath.Base(p)
		if !linked[rel] {
			t.Errorf("README.md does not link %s", rel)
		}
	}

	for _, f := range append([]string{filepath.Join(root, "README.md")}, pages...) {
		checkLinks(t, root, f)
	}

	table := map[string]bool{}
	inTable := false
	for _, line := range strings.Split(string(readme), "\n") {
		switch {
		case strings.HasPrefix(line, "## Commands"):
			inTable = true
		case strings.HasPrefix(line, "## "):
			inTable = false
		case inTable && strings.HasPrefix(line, "| `swerl "):
			name := strings.Fields(strings.TrimPrefix(line, "| `swerl "))[0]
			table[strings.TrimRight(name, "`")] = true
		}
	}
	var missing, extra []string
	for name := range commands {
		if !table[name] && name != "version" && !strings.HasPrefix(name, "test-") {
			missing = append(missing, name)
		}
	}
	for name := range table {
		if commands[name] == nil {
			extra = append(extra, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("README's commands table: missing %v, names commands that do not exist %v", missing, extra)
	}
}

// checkLinks resolves every relative Markdown link of file f.
func checkLinks(t *testing.T, root, f string) {
	t.Helper()
	text, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(root, f)
	for _, m := range mdLink.FindAllStringSubmatch(string(text), -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		path, anchor, _ := strings.Cut(target, "#")
		dest := f
		if path != "" {
			dest = filepath.Join(filepath.Dir(f), path)
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s links %s, which does not exist", rel, target)
				continue
			}
		}
		if anchor != "" && strings.HasSuffix(dest, ".md") && !hasAnchor(t, dest, anchor) {
			t.Errorf("%s links %s, but %s has no heading with that anchor", rel, target, filepath.Base(dest))
		}
	}
}

// hasAnchor reports whether a Markdown file has a heading whose GitHub
// anchor (lower case, punctuation dropped, spaces as dashes) is anchor.
func hasAnchor(t *testing.T, file, anchor string) bool {
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(text), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		if b.String() == anchor {
			return true
		}
	}
	return false
}
