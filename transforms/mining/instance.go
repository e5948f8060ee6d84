package mining

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"swerl/schemas"
	"swerl/transforms/reward"
)

// Reason says why a PR or commit did not become an instance. The zero value
// means it was kept.
type Reason string

// Reasons, as they appear in summaries and in the "reason" metric label.
const (
	Kept          Reason = ""
	Bot           Reason = "bot"            // title, body or user has a bot marker
	Empty         Reason = "empty"          // no file content changed
	TooLarge      Reason = "too_large"      // over Limits (files, lines or bytes)
	Binary        Reason = "binary"         // a changed file is binary
	NonUTF8       Reason = "non_utf8"       // a changed file is not UTF-8 text
	NonCode       Reason = "non_code"       // only docs, data, lock files, generated or vendored paths, or version bumps
	Excluded      Reason = "excluded"       // decontamination: repository or id excluded
	Duplicate     Reason = "duplicate"      // identical oracle patch kept under another id
	MergedTwice   Reason = "merged_twice"   // the PR number was merged again by another commit; its earliest merge is kept
	MissingObject Reason = "missing_object" // a commit, tree or blob the repository lacks
	NoMergeBase   Reason = "no_merge_base"  // the PR head shares no history with its target
	GitError      Reason = "git_error"      // git failed for another reason
	BadRecord     Reason = "bad_record"     // an input record (event, SWE-bench row) could not be used
)

// Limits caps the size of an instance's change. A zero field takes its
// default; a negative one disables that cap.
type Limits struct {
	MaxFiles int // changed files; default 50
	MaxLines int // added plus deleted lines; default 5000
	MaxBytes int // bytes of all changed files, before plus after; default 2 MiB
}

func pick(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return int(^uint(0) >> 1)
	}
	return v
}

// Files is the resolved file cap.
func (l Limits) Files() int { return pick(l.MaxFiles, 50) }

// Lines is the resolved changed-line cap.
func (l Limits) Lines() int { return pick(l.MaxLines, 5000) }

// Bytes is the resolved byte cap.
func (l Limits) Bytes() int { return pick(l.MaxBytes, 2<<20) }

// FileChange is one changed file with its content before and after. The
// contents are strings, as they end up in the instance (and as the miner's
// blob cache holds them), so building one copies nothing.
type FileChange struct {
	Path   string
	Old    string // content at the base; "" when HasOld is false
	New    string // content after; "" when HasNew is false
	HasOld bool   // the file exists at the base
	HasNew bool   // the file exists after the change
}

// PR describes the change an instance is built from.
type PR struct {
	ID          string // "owner/repo#N" or "owner/repo@<sha12>"
	Repo        string
	Number      int // 0 for a plain commit
	Source      string
	Title, Body string
	User        string
	BaseCommit  string
	MergeCommit string
	HeadCommit  string
	CreatedAt   string
	// ProblemStatement overrides the default (Title, blank line, Body), e.g.
	// with linked issues' titles and bodies from GitHub events.
	ProblemStatement string
	// LinkedIssues overrides the issues found in Title and Body.
	LinkedIssues []int
}

// Rejection is why Build did not make an instance, with the detail that
// names what was rejected.
type Rejection struct {
	Reason Reason
	Detail string
}

func (r *Rejection) Error() string { return string(r.Reason) + ": " + r.Detail }

func reject(r Reason, format string, a ...any) *Rejection {
	return &Rejection{Reason: r, Detail: fmt.Sprintf(format, a...)}
}

// Build turns a PR and its changed files into an instance, or says why not.
// relevant holds unmodified files (path → content at the base) to add to the
// code context. The filters run in this order: bot, empty, too large (files
// and bytes), binary, non-UTF-8, non-code, too large (lines), version bump.
func Build(pr PR, files []FileChange, relevant map[string]string, lim Limits) (schemas.Instance, *Rejection) {
	if IsBot(pr.Title, pr.Body, pr.User) {
		return schemas.Instance{}, reject(Bot, "%s: %q", pr.ID, firstLine(pr.Title))
	}
	var changed []FileChange
	for _, f := range files {
		if f.HasOld == f.HasNew && f.Old == f.New {
			continue
		}
		changed = append(changed, f)
	}
	if len(changed) == 0 {
		return schemas.Instance{}, reject(Empty, "%s: no file content changed", pr.ID)
	}
	if len(changed) > lim.Files() {
		return schemas.Instance{}, reject(TooLarge, "%s: %d files changed (max %d)", pr.ID, len(changed), lim.Files())
	}
	size := 0
	for _, f := range changed {
		size += len(f.Old) + len(f.New)
	}
	if size > lim.Bytes() {
		return schemas.Instance{}, reject(TooLarge, "%s: %d bytes changed (max %d)", pr.ID, size, lim.Bytes())
	}
	code := false
	for _, f := range changed {
		if IsBinaryString(f.Old) || IsBinaryString(f.New) {
			return schemas.Instance{}, reject(Binary, "%s: %s is binary", pr.ID, f.Path)
		}
		if !utf8.ValidString(f.Old) || !utf8.ValidString(f.New) || !utf8.ValidString(f.Path) {
			return schemas.Instance{}, reject(NonUTF8, "%s: %s is not UTF-8", pr.ID, f.Path)
		}
		code = code || IsCode(f.Path)
	}
	if !code {
		return schemas.Instance{}, reject(NonCode, "%s: only non-code files changed (%s)", pr.ID, changed[0].Path)
	}
	inst := schemas.Instance{
		SchemaVersion: schemas.Version, ID: pr.ID, Repo: pr.Repo, PRNumber: pr.Number,
		BaseCommit: pr.BaseCommit, MergeCommit: pr.MergeCommit, HeadCommit: pr.HeadCommit,
		CreatedAt: pr.CreatedAt, PRTitle: pr.Title, PRBody: pr.Body, PRUser: pr.User, Source: pr.Source,
		CodeContext: map[string]string{}, OracleNewContent: map[string]string{},
		LinkedIssues: pr.LinkedIssues, RelevantFiles: []string{},
	}
	if inst.LinkedIssues == nil {
		inst.LinkedIssues = LinkedIssues(pr.Title+"\n"+pr.Body, pr.Repo, pr.Number)
	}
	if inst.LinkedIssues == nil {
		inst.LinkedIssues = []int{}
	}
	inst.ProblemStatement = pr.ProblemStatement
	if inst.ProblemStatement == "" {
		inst.ProblemStatement = strings.TrimSpace(pr.Title + "\n\n" + pr.Body)
	}
	for _, f := range changed {
		if f.HasOld {
			inst.CodeContext[f.Path] = f.Old
		}
		inst.OracleNewContent[f.Path] = f.New // "" for a deletion
	}
	inst.OraclePatch = reward.GitDiff(inst.CodeContext, inst.OracleNewContent)
	inst.Stats = PatchStats(inst.OraclePatch)
	if inst.Stats.LinesAdded+inst.Stats.LinesDeleted > lim.Lines() {
		return schemas.Instance{}, reject(TooLarge, "%s: %d lines changed (max %d)", pr.ID, inst.Stats.LinesAdded+inst.Stats.LinesDeleted, lim.Lines())
	}
	if VersionBumpOnly(inst.OraclePatch) {
		return schemas.Instance{}, reject(NonCode, "%s: every changed line is a version string", pr.ID)
	}
	for _, p := range schemas.SortedPaths(relevant) {
		if _, modified := inst.OracleNewContent[p]; modified || !utf8.ValidString(relevant[p]) {
			continue
		}
		inst.CodeContext[p] = relevant[p]
		inst.RelevantFiles = append(inst.RelevantFiles, p)
	}
	inst.Language = MainLanguage(changed)
	return inst, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// PatchStats counts files, added and deleted lines, hunks and bytes of a
// unified diff.
func PatchStats(patch string) schemas.ChangeStats {
	st := schemas.ChangeStats{PatchBytes: len(patch)}
	for _, l := range strings.Split(patch, "\n") {
		switch {
		case strings.HasPrefix(l, "diff --git "):
			st.FilesChanged++
		case strings.HasPrefix(l, "@@ "):
			st.Hunks++
		case strings.HasPrefix(l, "+++ "), strings.HasPrefix(l, "--- "):
		case strings.HasPrefix(l, "+"):
			st.LinesAdded++
		case strings.HasPrefix(l, "-"):
			st.LinesDeleted++
		}
	}
	return st
}

// VersionBumpOnly reports whether every added or deleted line of patch that
// is not blank contains the word "version" (case-insensitively): the per-hunk rule
// that drops version bumps.
func VersionBumpOnly(patch string) bool {
	changed := 0
	for _, l := range strings.Split(patch, "\n") {
		if strings.HasPrefix(l, "+++ ") || strings.HasPrefix(l, "--- ") {
			continue
		}
		if strings.HasPrefix(l, "+") || strings.HasPrefix(l, "-") {
			body := strings.TrimSpace(l[1:])
			if body == "" {
				continue
			}
			if !strings.Contains(strings.ToLower(body), "version") {
				return false
			}
			changed++
		}
	}
	return changed > 0
}

// MainLanguage is the language of the most changed code files (ties broken
// by name), or "" when none is code.
func MainLanguage(files []FileChange) string {
	count := map[string]int{}
	for _, f := range files {
		if IsCode(f.Path) {
			count[Language(f.Path)]++
		}
	}
	best := ""
	for lang, n := range count {
		if best == "" || n > count[best] || n == count[best] && lang < best {
			best = lang
		}
	}
	return best
}

// PatchKey is the deduplication key of an oracle patch: the hex SHA-256 of
// its bytes. Two instances with the same key carry identical changes.
func PatchKey(patch string) string {
	h := sha256.Sum256([]byte(patch))
	return hex.EncodeToString(h[:])
}

// Dedup keeps the first instance seen for each oracle patch. It is not safe
// for concurrent use; pipelines deduplicate with a GroupByKey on PatchKey
// and keep the smallest id (see PickFirst) so the choice does not depend on
// order.
type Dedup struct{ seen map[string]string }

// Add reports the id already kept for inst's patch, or "" after recording
// inst as the first.
func (d *Dedup) Add(inst schemas.Instance) string {
	if d.seen == nil {
		d.seen = map[string]string{}
	}
	k := PatchKey(inst.OraclePatch)
	if id, ok := d.seen[k]; ok {
		return id
	}
	d.seen[k] = inst.ID
	return ""
}

// PickFirst returns the index of the instance to keep among instances with
// the same patch: the smallest id (IDLess), so every runner keeps the same
// one.
func PickFirst(ids []string) int {
	best := 0
	for i := range ids {
		if IDLess(ids[i], ids[best]) {
			best = i
		}
	}
	return best
}

// IDLess orders instance ids by repository, then PR number numerically
// ("o/r#2" before "o/r#11", SWE-bench's "o__r-2" before "o__r-11"), then as
// strings.
func IDLess(a, b string) bool {
	ra, na, oka := strings.Cut(a, "#")
	rb, nb, okb := strings.Cut(b, "#")
	if !oka && !okb {
		// SWE-bench ids: "owner__repo-N".
		if i, j := strings.LastIndexByte(a, '-'), strings.LastIndexByte(b, '-'); i >= 0 && j >= 0 {
			ra, na, rb, nb, oka, okb = a[:i], a[i+1:], b[:j], b[j+1:], true, true
		}
	}
	if oka && okb && ra == rb {
		x, errx := strconv.Atoi(na)
		y, erry := strconv.Atoi(nb)
		if errx == nil && erry == nil && x != y {
			return x < y
		}
	}
	return a < b
}
