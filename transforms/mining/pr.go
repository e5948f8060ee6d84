package mining

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var (
	mergeRE  = regexp.MustCompile(`^Merge pull request #([0-9]{1,9}) from (\S+)`)
	squashRE = regexp.MustCompile(`\(#([0-9]{1,9})\)\s*$`)
	// closingRE: GitHub's closing keywords followed by a reference.
	closingRE = regexp.MustCompile(`(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+((?:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)?#[0-9]{1,9}|https?://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/issues/[0-9]{1,9})`)
	crossRE   = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)#([0-9]{1,9})\b`)
	urlRE     = regexp.MustCompile(`https?://github\.com/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)/issues/([0-9]{1,9})\b`)
)

// MergeSubject parses a GitHub merge-commit subject, "Merge pull request #N
// from owner/branch", returning N and the source ("owner/branch").
func MergeSubject(subject string) (n int, from string, ok bool) {
	m := mergeRE.FindStringSubmatch(subject)
	if m == nil {
		return 0, "", false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n <= 0 {
		return 0, "", false
	}
	return n, m[2], true
}

// SquashSubject parses a squash-merge subject, "title (#N)", returning N and
// the title without the reference.
func SquashSubject(subject string) (n int, title string, ok bool) {
	loc := squashRE.FindStringSubmatchIndex(subject)
	if loc == nil {
		return 0, "", false
	}
	n, err := strconv.Atoi(subject[loc[2]:loc[3]])
	if err != nil || n <= 0 {
		return 0, "", false
	}
	return n, strings.TrimSpace(subject[:loc[0]]), true
}

// LinkedIssues returns the issues of repo ("owner/repo") that text links
// with a closing keyword ("fixes #12", "Closes owner/repo#3", "resolved
// https://github.com/owner/repo/issues/4"), plus bare same-repository
// references "owner/repo#N" and issue URLs. Bare "#N" without a keyword is
// not a link (it is usually a mention). self, when positive, is the PR's own
// number and is never returned. The result is sorted and unique.
func LinkedIssues(text, repo string, self int) []int {
	set := map[int]bool{}
	add := func(s string) {
		if n, err := strconv.Atoi(s); err == nil && n > 0 && n != self {
			set[n] = true
		}
	}
	sameRepo := func(r string) bool { return repo != "" && strings.EqualFold(r, repo) }
	for _, m := range closingRE.FindAllStringSubmatch(text, -1) {
		ref := m[1]
		if u := urlRE.FindStringSubmatch(ref); u != nil {
			if sameRepo(u[1]) {
				add(u[2])
			}
			continue
		}
		r, num, _ := strings.Cut(ref, "#")
		if r == "" || sameRepo(r) {
			add(num)
		}
	}
	for _, m := range crossRE.FindAllStringSubmatch(text, -1) {
		if sameRepo(m[1]) {
			add(m[2])
		}
	}
	for _, m := range urlRE.FindAllStringSubmatch(text, -1) {
		if sameRepo(m[1]) {
			add(m[2])
		}
	}
	out := make([]int, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// botMarkers are the SWE-RL paper's bot filter words.
var botMarkers = []string{"[bot]", "dependabot", "renovate", "bump", "automerge"}

// IsBot reports whether a PR's title, body or user contains one of the
// paper's bot markers ("[bot]", "dependabot", "renovate", "bump",
// "automerge"), case-insensitively. "Co-authored-by:" trailer lines of the
// body are not read: they name who pushed commits to the PR (a
// pre-commit-ci[bot] fix-up on a human PR), not who made it, and are not
// part of its description.
func IsBot(title, body, user string) bool {
	for i, s := range []string{title, body, user} {
		l := strings.ToLower(s)
		if i == 1 {
			l = withoutCoAuthors(l)
		}
		for _, m := range botMarkers {
			if strings.Contains(l, m) {
				return true
			}
		}
	}
	return false
}

// withoutCoAuthors returns the lower-case text l without its lines that
// start (after blanks) with "co-authored-by:".
func withoutCoAuthors(l string) string {
	const trailer = "co-authored-by:"
	if !strings.Contains(l, trailer) {
		return l
	}
	var b strings.Builder
	for line := range strings.Lines(l) {
		if !strings.HasPrefix(strings.TrimLeft(line, " \t"), trailer) {
			b.WriteString(line)
		}
	}
	return b.String()
}

// SplitMessage splits a commit message into its subject (first line) and
// body (the rest, trimmed).
func SplitMessage(msg string) (subject, body string) {
	s, b, _ := strings.Cut(strings.TrimLeft(msg, "\n"), "\n")
	return strings.TrimSpace(s), strings.TrimSpace(b)
}
