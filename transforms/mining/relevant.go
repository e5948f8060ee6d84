package mining

import (
	"path"
	"regexp"
	"sort"
	"strings"
)

// RelevantConfig configures the relevant-file heuristic, SWE-RL's "relevant
// but unmodified files" (the paper asks an LLM; we rank by static evidence).
//
// A candidate file scores
//
//	+4 when the issue text (problem statement) names its path or base name,
//	+3 when a modified file imports it, or it imports a modified file,
//	+1 when it is a code file in the same directory (package) as a modified file,
//
// and files scoring 0 are never added. The best MaxFiles by score (ties by
// path) are added to the code context.
type RelevantConfig struct {
	// MaxFiles is how many relevant files an instance gets; default 3,
	// negative for none.
	MaxFiles int
	// MaxFileBytes skips larger candidates; default 64 KiB.
	MaxFileBytes int
	// MaxCandidates caps the candidate files read per instance; default 64.
	MaxCandidates int
}

// Files is the resolved MaxFiles (0 when disabled).
func (c RelevantConfig) Files() int {
	switch {
	case c.MaxFiles < 0:
		return 0
	case c.MaxFiles == 0:
		return 3
	}
	return c.MaxFiles
}

// FileBytes is the resolved MaxFileBytes.
func (c RelevantConfig) FileBytes() int { return pick(c.MaxFileBytes, 64<<10) }

// Candidates is the resolved MaxCandidates.
func (c RelevantConfig) Candidates() int { return pick(c.MaxCandidates, 64) }

// Rank chooses relevant files among candidates (path → content at the
// base) for a change to modified (path → content at the base, "" for a new
// file), given the issue text. It returns at most cfg.Files() paths, best
// first; modified files are never returned.
func Rank(modified, candidates map[string]string, issue string, goModule string, cfg RelevantConfig) []string {
	return RankWith(modified, candidates, issue, cfg, func(p, content string) []string { return ImportTargets(p, content, goModule) })
}

// RankWith is Rank with the import targets of a file (modified or
// candidate) given by imports, which must return what ImportTargets(p,
// content, goModule) does: a miner that ranks many changes over the same
// files parses each file once (parsing was a tenth of mining's CPU).
func RankWith(modified, candidates map[string]string, issue string, cfg RelevantConfig, imports func(p, content string) []string) []string {
	limit := cfg.Files()
	if limit == 0 {
		return nil
	}
	named := map[string]bool{}
	for _, p := range NamedPaths(issue) {
		named[p] = true
	}
	imported := map[string]bool{} // targets imported by modified files
	dirs := map[string]bool{}
	for p, content := range modified {
		dirs[path.Dir(p)] = true
		for _, t := range imports(p, content) {
			imported[t] = true
		}
	}
	type scored struct {
		path  string
		score int
	}
	var all []scored
	for p, content := range candidates {
		if _, ok := modified[p]; ok || len(content) > cfg.FileBytes() {
			continue
		}
		s := 0
		if named[p] || named[path.Base(p)] {
			s += 4
		}
		if imported[p] || imported[path.Dir(p)+"/"] && Language(p) == "Go" && !strings.HasSuffix(p, "_test.go") {
			s += 3
		} else {
			for _, t := range imports(p, content) {
				if _, ok := modified[t]; ok || strings.HasSuffix(t, "/") && dirs[strings.TrimSuffix(t, "/")] {
					s += 3
					break
				}
			}
		}
		if dirs[path.Dir(p)] && IsCode(p) {
			s++
		}
		if s > 0 {
			all = append(all, scored{p, s})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].score != all[j].score {
			return all[i].score > all[j].score
		}
		return all[i].path < all[j].path
	})
	var out []string
	for _, s := range all {
		if len(out) == limit {
			break
		}
		out = append(out, s.path)
	}
	return out
}

var (
	pathTokenRE = regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.[A-Za-z][A-Za-z0-9]{0,5}\b`)
	pyImportRE  = regexp.MustCompile(`^import\s+([A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)`)
	pyFromRE    = regexp.MustCompile(`^from\s+(\.*)([\w.]*)\s+import\s+\(?\s*([\w, ]+)`)
	jsImportRE  = regexp.MustCompile(`(?:from\s+|import\s+|require\(\s*|import\(\s*)['"](\.{1,2}/[^'"\n]+)['"]`)
	cIncludeRE  = regexp.MustCompile(`^#\s*include\s+"([^"\n]+)"`)
	goImportRE  = regexp.MustCompile(`"([^"\n]+)"`)
	javaRE      = regexp.MustCompile(`^import\s+(?:static\s+)?([\w.]+)\s*;`)
	rustModRE   = regexp.MustCompile(`^(?:pub\s+)?mod\s+(\w+)\s*;`)
	goModuleRE  = regexp.MustCompile(`(?m)^\s*module\s+"?([^\s"]+)"?`)
)

// importNeedles maps a language to a string that every line holding one
// of its imports contains (the word its import regular expression needs).
var importNeedles = map[string]string{
	"Python": "import", "Go": "import", "Java": "import", "Kotlin": "import", "Scala": "import",
	"JavaScript": "./", "TypeScript": "./", "Vue": "./", "Svelte": "./",
	"C": "include", "C++": "include", "CUDA": "include", "Objective-C": "include",
	"Rust": "mod",
}

// importLines calls fn with each line of content (leading blanks trimmed)
// that can hold an import for lang, so the regular expressions only see
// those lines. For Go, the lines of an import block are passed whole.
//
// It jumps from one occurrence of the language's needle to the next
// (strings.Index, vectorized) instead of walking every line: most lines of
// a file hold no import, and ranking relevant files reads up to 64 files
// per instance. TestImportLinesMatchLineScan and FuzzImportLines check it
// against the line-by-line scan it replaced.
func importLines(lang, content string, fn func(line string)) {
	needle := importNeedles[lang]
	if needle == "" {
		return
	}
	for len(content) > 0 {
		i := strings.Index(content, needle)
		if i < 0 {
			return
		}
		start := strings.LastIndexByte(content[:i], '\n') + 1
		line, rest, _ := strings.Cut(content[start:], "\n")
		content = rest
		t := trimBlanks(line)
		switch lang {
		default:
			if mayImport(lang, t) {
				fn(t)
			}
		case "Go":
			if !strings.HasPrefix(t, "import") {
				continue
			}
			rest := trimBlanks(t[len("import"):])
			if !strings.HasPrefix(rest, "(") {
				if t != "import" {
					fn(rest)
				}
				continue
			}
			fn(rest)
			if strings.Contains(rest, ")") {
				continue
			}
			// An import block: every line up to the one starting with ")".
			for len(content) > 0 {
				line, content, _ = strings.Cut(content, "\n")
				t := trimBlanks(line)
				if strings.HasPrefix(t, ")") {
					break
				}
				fn(t)
			}
		}
	}
}

// mayImport reports whether line t (blanks trimmed) can hold an import in
// lang, for every language but Go, whose import blocks span lines.
func mayImport(lang, t string) bool {
	switch lang {
	case "Python":
		return strings.HasPrefix(t, "import") || strings.HasPrefix(t, "from")
	case "JavaScript", "TypeScript", "Vue", "Svelte":
		return strings.Contains(t, "./") && (strings.Contains(t, "import") || strings.Contains(t, "require") || strings.Contains(t, "from"))
	case "C", "C++", "CUDA", "Objective-C":
		return strings.HasPrefix(t, "#")
	case "Java", "Kotlin", "Scala":
		return strings.HasPrefix(t, "import")
	case "Rust":
		return strings.HasPrefix(t, "mod") || strings.HasPrefix(t, "pub")
	}
	return false
}

// trimBlanks drops leading spaces and tabs.
func trimBlanks(s string) string {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return s[i:]
}

// NamedPaths returns the file paths and file names mentioned in text
// (tokens such as "pkg/a/b.go" or "setup.py" with a code extension),
// cleaned, in order of first mention.
func NamedPaths(text string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range pathTokenRE.FindAllString(text, -1) {
		t = strings.TrimLeft(t, "./")
		if t == "" || Language(t) == "" || strings.Contains(t, "://") {
			continue
		}
		t = path.Clean(t)
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// GoModulePath returns the module path declared in a go.mod file.
func GoModulePath(gomod string) string {
	m := goModuleRE.FindStringSubmatch(gomod)
	if m == nil {
		return ""
	}
	return m[1]
}

// ImportTargets returns the repository paths that the file at p (with
// content) may import: files for Python, JavaScript/TypeScript, C/C++
// includes, Java and Rust modules; for Go, package directories of goModule
// with a trailing "/". Paths are cleaned and relative to the repository
// root; targets outside it are dropped.
func ImportTargets(p, content, goModule string) []string {
	return importTargets(p, content, goModule, importLines)
}

// importTargets is ImportTargets with the line scanner as a parameter.
func importTargets(p, content, goModule string, lines func(lang, content string, fn func(string))) []string {
	dir := path.Dir(p)
	seen := map[string]bool{}
	var out []string
	add := func(t string) {
		t = path.Clean(t)
		if t == "." || strings.HasPrefix(t, "../") || t == ".." || strings.HasPrefix(t, "/") {
			return
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	first := func(re *regexp.Regexp, line string) []string { return re.FindStringSubmatch(line) }
	prefixed := func(word string, re *regexp.Regexp, line string) []string {
		if !strings.HasPrefix(line, word) {
			return nil
		}
		return re.FindStringSubmatch(line)
	}
	lang := Language(p)
	lines(lang, content, func(line string) {
		switch lang {
		case "Python":
			// Each expression is anchored and starts with its keyword:
			// a line can match only the one its first word names.
			if m := prefixed("import", pyImportRE, line); m != nil {
				for _, mod := range strings.Split(m[1], ",") {
					mp := strings.ReplaceAll(strings.TrimSpace(mod), ".", "/")
					add(mp + ".py")
					add(mp + "/__init__.py")
				}
			}
			if m := prefixed("from", pyFromRE, line); m != nil {
				base := strings.ReplaceAll(m[2], ".", "/")
				if dots := len(m[1]); dots > 0 {
					d := dir
					for i := 1; i < dots; i++ {
						if d == "." {
							d = ".." // above the repository root: dropped by add
							break
						}
						d = path.Dir(d)
					}
					base = path.Join(d, base)
				}
				if m[2] != "" {
					add(base + ".py")
					add(base + "/__init__.py")
				}
				for _, name := range strings.Split(m[3], ",") {
					if name = strings.TrimSpace(name); name != "" && name != "*" {
						add(path.Join(base, name) + ".py")
					}
				}
			}
		case "JavaScript", "TypeScript", "Vue", "Svelte":
			for _, m := range jsImportRE.FindAllStringSubmatch(line, -1) {
				t := path.Join(dir, m[1])
				if path.Ext(t) != "" && Language(t) != "" {
					add(t)
					continue
				}
				for _, ext := range []string{".js", ".ts", ".tsx", ".jsx", ".mjs", "/index.js", "/index.ts"} {
					add(t + ext)
				}
			}
		case "C", "C++", "CUDA", "Objective-C":
			if m := first(cIncludeRE, line); m != nil {
				add(path.Join(dir, m[1]))
				add(m[1])
				add(path.Join("include", m[1]))
			}
		case "Java", "Kotlin", "Scala":
			if m := first(javaRE, line); m != nil {
				cls := strings.ReplaceAll(m[1], ".", "/")
				for _, root := range []string{"", "src/main/java/", "src/"} {
					add(root + cls + ".java")
					add(root + cls + ".kt")
				}
			}
		case "Rust":
			if m := first(rustModRE, line); m != nil {
				add(path.Join(dir, m[1]+".rs"))
				add(path.Join(dir, m[1], "mod.rs"))
			}
		case "Go":
			if goModule == "" {
				return
			}
			for _, m := range goImportRE.FindAllStringSubmatch(line, -1) {
				rel, ok := strings.CutPrefix(m[1], goModule+"/")
				if ok {
					t := path.Clean(rel)
					if !strings.HasPrefix(t, "..") && !seen[t+"/"] {
						seen[t+"/"] = true
						out = append(out, t+"/")
					}
				}
			}
		}
	})
	return out
}
