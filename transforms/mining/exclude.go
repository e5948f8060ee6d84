package mining

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// SWEBenchRepos are the repositories of SWE-bench (full, Lite and Verified
// draw from the same twelve), excluded for decontamination as in SWE-RL.
var SWEBenchRepos = []string{
	"astropy/astropy", "django/django", "matplotlib/matplotlib", "mwaskom/seaborn",
	"pallets/flask", "psf/requests", "pydata/xarray", "pylint-dev/pylint",
	"pytest-dev/pytest", "scikit-learn/scikit-learn", "sphinx-doc/sphinx", "sympy/sympy",
}

// Exclude is a decontamination list of repositories ("owner/repo") and
// instance ids ("owner/repo#N", "owner/repo@sha"), matched case-insensitively.
// The zero value excludes nothing.
type Exclude struct {
	Repos map[string]bool
	IDs   map[string]bool
}

// AddRepos excludes whole repositories.
func (e *Exclude) AddRepos(repos ...string) {
	if e.Repos == nil {
		e.Repos = map[string]bool{}
	}
	for _, r := range repos {
		e.Repos[strings.ToLower(r)] = true
	}
}

// ParseExclude reads an exclude file: one repository or instance id a line;
// blank lines and text after "#" at the start of a line or after whitespace
// are ignored. name names the file in errors.
func ParseExclude(r io.Reader, name string) (*Exclude, error) {
	e := &Exclude{Repos: map[string]bool{}, IDs: map[string]bool{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for line := 1; sc.Scan(); line++ {
		t := sc.Text()
		if i := strings.Index(t, " #"); i >= 0 {
			t = t[:i]
		}
		t = strings.TrimSpace(t)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		repo, _, _ := strings.Cut(t, "#")
		repo, _, _ = strings.Cut(repo, "@")
		if strings.Count(repo, "/") != 1 || strings.HasPrefix(repo, "/") || strings.HasSuffix(repo, "/") || strings.ContainsAny(t, " \t") {
			return nil, fmt.Errorf("mining: %s:%d: want owner/repo, owner/repo#N or owner/repo@sha, got %q", name, line, t)
		}
		if repo == t {
			e.Repos[strings.ToLower(t)] = true
		} else {
			e.IDs[strings.ToLower(t)] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mining: %s: %w", name, err)
	}
	return e, nil
}

// Repo reports whether a whole repository is excluded.
func (e *Exclude) Repo(repo string) bool {
	return e != nil && e.Repos[strings.ToLower(repo)]
}

// Match reports whether an instance of repo with id is excluded.
func (e *Exclude) Match(repo, id string) bool {
	if e == nil {
		return false
	}
	return e.Repos[strings.ToLower(repo)] || e.IDs[strings.ToLower(id)]
}
