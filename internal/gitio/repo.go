package gitio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// ErrMissing reports an object that the repository does not have.
var ErrMissing = errors.New("object missing")

// Repo is a local git repository, bare or not.
type Repo struct {
	// Dir is the directory git runs in (the work tree or the bare repository).
	Dir string
	// Name is "owner/repo" from remote.origin.url when it has one, else the
	// directory's name (without a ".git" suffix).
	Name string
}

// Open checks that dir is a git repository and names it.
func Open(ctx context.Context, dir string) (*Repo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("gitio: open %s: %w", dir, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("gitio: open %s: %w", dir, err)
	}
	if _, err := output(ctx, abs, "rev-parse", "--git-dir"); err != nil {
		return nil, fmt.Errorf("gitio: open %s: not a git repository: %w", dir, err)
	}
	r := &Repo{Dir: abs}
	url, _ := output(ctx, abs, "config", "--get", "remote.origin.url")
	r.Name = NameFromURL(strings.TrimSpace(string(url)))
	if r.Name == "" {
		base := filepath.Base(abs)
		if base == ".git" {
			base = filepath.Base(filepath.Dir(abs))
		}
		r.Name = strings.TrimSuffix(base, ".git")
	}
	return r, nil
}

// IsURL reports whether repo names a remote repository rather than a local
// path: a URL (https://, ssh://, git://, file://) or scp-like syntax
// (git@host:owner/repo).
func IsURL(repo string) bool { return urlRE.MatchString(repo) }

var urlRE = regexp.MustCompile(`^(?:[A-Za-z][A-Za-z0-9+.-]*://|[^/@:]+@[^/:]+:)`)

// Clone makes a bare clone of url in dir (which must not exist yet) and
// opens it; it is named from url. Nothing is fetched lazily later (see
// gitEnv), so the clone is complete: every blob a PR changed is read.
func Clone(ctx context.Context, url, dir string) (*Repo, error) {
	if strings.HasPrefix(url, "-") {
		return nil, fmt.Errorf("gitio: clone: bad url %q", url)
	}
	if _, err := output(ctx, "", "clone", "--bare", "--quiet", "--", url, dir); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("gitio: clone %s: %w", url, err)
	}
	r, err := Open(ctx, dir)
	if err != nil {
		return nil, err
	}
	if n := NameFromURL(url); n != "" {
		r.Name = n
	}
	return r, nil
}

// NameFromURL returns "owner/repo" for a remote URL such as
// https://github.com/owner/repo.git, git@github.com:owner/repo or
// ssh://git@host/owner/repo, and "" when the URL has no owner and name.
func NameFromURL(url string) string {
	u := strings.TrimSuffix(strings.TrimRight(url, "/"), ".git")
	if u == "" {
		return ""
	}
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
		if j := strings.IndexByte(u, '/'); j >= 0 {
			u = u[j+1:]
		} else {
			return ""
		}
	} else if i := strings.IndexByte(u, ':'); i >= 0 && !strings.HasPrefix(u, "/") {
		u = u[i+1:]
	}
	parts := strings.Split(strings.Trim(u, "/"), "/")
	if len(parts) < 2 {
		return ""
	}
	owner, name := parts[len(parts)-2], parts[len(parts)-1]
	if owner == "" || name == "" || owner == "." || owner == ".." {
		return ""
	}
	return owner + "/" + name
}

// Head returns the commit HEAD points at.
func (r *Repo) Head(ctx context.Context) (string, error) {
	out, err := output(ctx, r.Dir, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", fmt.Errorf("gitio: %s: resolve HEAD: %w", r.Name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// ResolveRefs returns the commits that refs name, each once, in order: a
// ref is a revision (a branch, tag, commit or HEAD) or, when it holds a
// glob character (*?[), a pattern that `git for-each-ref` matches ("refs/heads/*",
// "refs/tags/v1.*"). Refs that name no commit are returned in missing. A ref
// may not start with "-": it would be an option to git.
func (r *Repo) ResolveRefs(ctx context.Context, refs []string) (commits, missing []string, err error) {
	seen := map[string]bool{}
	add := func(h string) {
		if h != "" && !seen[h] {
			seen[h] = true
			commits = append(commits, h)
		}
	}
	for _, ref := range refs {
		if ref == "" || strings.HasPrefix(ref, "-") {
			return nil, nil, fmt.Errorf("gitio: %s: bad ref %q", r.Name, ref)
		}
		if strings.ContainsAny(ref, "*?[") {
			// A tag is peeled to what it points at (%(*…)); only commits count.
			out, err := output(ctx, r.Dir, "for-each-ref", "--format=%(objecttype) %(objectname) %(*objecttype) %(*objectname)", ref)
			if err != nil {
				return nil, nil, fmt.Errorf("gitio: %s: refs %q: %w", r.Name, ref, err)
			}
			n := len(commits)
			for _, l := range strings.Split(string(out), "\n") {
				switch f := strings.Fields(l); {
				case len(f) == 2 && f[0] == "commit":
					add(f[1])
				case len(f) == 4 && f[2] == "commit":
					add(f[3])
				}
			}
			if len(commits) == n {
				missing = append(missing, ref)
			}
			continue
		}
		h, err := output(ctx, r.Dir, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
		if err != nil {
			missing = append(missing, ref)
			continue
		}
		add(strings.TrimSpace(string(h)))
	}
	return commits, missing, nil
}

// output runs one short git command and returns its stdout; a failure
// carries git's stderr.
func output(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s", err, msg)
	}
	return out, nil
}

// gitEnv keeps user configuration that changes output formats (pagers,
// colours, replace refs, lazy fetches of partial clones) out of our parses.
func gitEnv() []string {
	return append(os.Environ(),
		"GIT_PAGER=cat", "PAGER=cat", "GIT_NO_REPLACE_OBJECTS=1",
		"GIT_NO_LAZY_FETCH=1", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C",
	)
}
