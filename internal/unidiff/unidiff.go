// Package unidiff parses git-style unified diffs the way Python's unidiff
// package (PatchSet) does, and renders the per-file normalization that the
// SWE-RL reference reward (get_filelevel_diff) compares.
//
// The parser follows unidiff's line-by-line state machine: "diff --git"
// headers (renames, new and deleted files), "---"/"+++" file headers, hunks
// whose header counts decide where the hunk ends, "\ No newline at end of
// file" markers, empty lines after hunks, and "Binary files … differ" / "GIT
// binary patch" entries. Input is split into lines at "\n" only, as Python's
// StringIO does. Anything unidiff rejects is rejected here with an error
// naming the line.
package unidiff

import (
	"fmt"
	"regexp"
	"strings"
	"swerl/internal/difflib"
	"unicode"
	"unicode/utf8"
)

// DevNull is the path git uses for the missing side of an added or deleted
// file.
const DevNull = "/dev/null"

// Line is one hunk line. Type is "+", "-", " ", "\\" (a no-newline marker)
// or "" (an empty line that followed the hunk); Value keeps the line's end.
type Line struct {
	Type  string
	Value string
}

// String renders the line as unidiff's str(Line) does.
func (l Line) String() string { return l.Type + l.Value }

// Hunk is one "@@ … @@" block. The start and length numbers are kept as the
// decimal text Python's "%d" would print for them.
type Hunk struct {
	SourceStart, SourceLength string
	TargetStart, TargetLength string
	Section                   string // text after the closing "@@", may be ""
	Lines                     []Line
}

// String renders the hunk as unidiff's str(Hunk) does: the header always
// with both lengths, then the lines as they were.
func (h *Hunk) String() string {
	var sb strings.Builder
	sb.WriteString("@@ -")
	sb.WriteString(h.SourceStart)
	sb.WriteByte(',')
	sb.WriteString(h.SourceLength)
	sb.WriteString(" +")
	sb.WriteString(h.TargetStart)
	sb.WriteByte(',')
	sb.WriteString(h.TargetLength)
	sb.WriteString(" @@")
	if h.Section != "" {
		sb.WriteByte(' ')
		sb.WriteString(h.Section)
	}
	sb.WriteByte('\n')
	for _, l := range h.Lines {
		sb.WriteString(l.Type)
		sb.WriteString(l.Value)
	}
	return sb.String()
}

// File is one patched file.
type File struct {
	Source, Target string // as written, e.g. "a/x.py", "b/x.py", DevNull
	Binary         bool
	Hunks          []*Hunk
	Line           int // 1-based line of the diff where the entry starts
}

// IsRename reports unidiff's is_rename: neither side is /dev/null and the
// paths differ after their first two characters.
func (f *File) IsRename() bool {
	return f.Source != DevNull && f.Target != DevNull && dropRunes(f.Source, 2) != dropRunes(f.Target, 2)
}

// Path is unidiff's PatchedFile.path: the source path (the target for added
// files and renames) without its "a/" or "b/" prefix; quotes are kept.
func (f *File) Path() string {
	p := f.Source
	if p == DevNull || (f.IsRename() && f.Target != DevNull) {
		p = f.Target
	}
	quoted := len(p) > 0 && p[0] == '"' && p[len(p)-1] == '"'
	if quoted {
		if len(p) >= 2 {
			p = p[1 : len(p)-1]
		} else {
			p = ""
		}
	}
	if strings.HasPrefix(p, "a/") || strings.HasPrefix(p, "b/") {
		p = p[2:]
	}
	if quoted {
		p = `"` + p + `"`
	}
	return p
}

func dropRunes(s string, n int) string {
	for i := 0; i < n && len(s) > 0; i++ {
		_, size := utf8.DecodeRuneInString(s)
		s = s[size:]
	}
	return s
}

// ParseError says why a diff was rejected and on which line.
type ParseError struct {
	Line int // 1-based
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

var (
	reGitHeader         = regexp.MustCompile(`^diff --git (a/[^\t\n]+) (b/[^\t\n]+)`)
	reGitHeaderURI      = regexp.MustCompile(`^diff --git (.*://[^\t\n]+) (.*://[^\t\n]+)`)
	reGitHeaderNoPrefix = regexp.MustCompile(`^diff --git ([^\t\n]+) ([^\t\n]+)`)
	reGitNewFile        = regexp.MustCompile(`^new file mode \d+\n?$`)
	reGitDeletedFile    = regexp.MustCompile(`^deleted file mode \d+\n?$`)
	reSourceFile        = regexp.MustCompile(`^--- ([^\t\n]+)(?:\t([^\n]+))?`)
	reTargetFile        = regexp.MustCompile(`^\+\+\+ ([^\t\n]+)(?:\t([^\n]+))?`)
	reBinary            = regexp.MustCompile(`^Binary files? ([^\t]+?)(?:\t[\s0-9:+-]+)?(?: and ([^\t]+?)(?:\t[\s0-9:+-]+)?)? (?:differ|has changed)`)
)

const noNewlineMarker = `\ No newline at end of file`

// Parse parses a unified diff with unidiff's rules.
func Parse(text string) ([]*File, error) {
	lines := difflib.SplitAfterNewline(text)
	var files []*File
	var cur *File
	patchInfo := false // unidiff's patch_info is not None
	var sourceFile string
	sourceSet := false // Python's local source_file is bound
	sourceTSSet := false

	for n := 0; n < len(lines); n++ {
		line := lines[n]
		lineNo := n + 1
		fail := func(format string, a ...any) error {
			return &ParseError{lineNo, fmt.Sprintf(format, a...)}
		}

		m := reGitHeader.FindStringSubmatch(line)
		if m == nil {
			m = reGitHeaderURI.FindStringSubmatch(line)
		}
		if m == nil {
			m = reGitHeaderNoPrefix.FindStringSubmatch(line)
		}
		if m != nil {
			patchInfo = true
			sourceFile, sourceSet = m[1], true
			cur = &File{Source: m[1], Target: m[2], Line: lineNo}
			files = append(files, cur)
			continue
		}
		if reGitNewFile.MatchString(line) {
			if cur == nil || !patchInfo {
				return nil, fail("unexpected new file found: %q", line)
			}
			cur.Source = DevNull
			continue
		}
		if reGitDeletedFile.MatchString(line) {
			if cur == nil || !patchInfo {
				return nil, fail("unexpected deleted file found: %q", line)
			}
			cur.Target = DevNull
			continue
		}
		if m := reSourceFile.FindStringSubmatch(line); m != nil {
			sourceFile, sourceSet, sourceTSSet = m[1], true, true
			if cur != nil && cur.Source != sourceFile {
				cur = nil
			}
			continue
		}
		if m := reTargetFile.FindStringSubmatch(line); m != nil {
			target := m[1]
			if cur != nil && cur.Target != target {
				return nil, fail("target without source: %q", line)
			}
			if cur == nil {
				if !sourceSet || !sourceTSSet {
					return nil, fail("target without source: %q", line)
				}
				cur = &File{Source: sourceFile, Target: target, Line: lineNo}
				files = append(files, cur)
				patchInfo = false
			}
			continue
		}
		if strings.HasPrefix(line, "@@ -") {
			if h, ok := parseHunkHeader(line); ok {
				patchInfo = false
				if cur == nil {
					return nil, fail("unexpected hunk found: %q", line)
				}
				next, err := parseHunkBody(h, lines, n+1)
				if err != nil {
					return nil, err
				}
				cur.Hunks = append(cur.Hunks, h)
				n = next - 1
				continue
			}
		}
		if strings.HasPrefix(line, noNewlineMarker) {
			if cur == nil || len(cur.Hunks) == 0 {
				return nil, fail("unexpected marker: %q", line)
			}
			h := cur.Hunks[len(cur.Hunks)-1]
			h.Lines = append(h.Lines, Line{`\`, " No newline at end of file\n"})
			continue
		}
		if line == "\n" && cur != nil && len(cur.Hunks) > 0 {
			h := cur.Hunks[len(cur.Hunks)-1]
			h.Lines = append(h.Lines, Line{"", "\n"})
			continue
		}
		if !patchInfo {
			cur = nil
			patchInfo = true
		}
		if m := reBinary.FindStringSubmatch(line); m != nil {
			sourceFile, sourceSet = m[1], true
			if cur != nil {
				cur.Binary = true
			} else {
				files = append(files, &File{Source: m[1], Target: m[2], Binary: true, Line: lineNo})
			}
			patchInfo = false
			cur = nil
			continue
		}
		if line == "GIT binary patch\n" {
			if cur == nil {
				return nil, fail("unexpected binary patch marker")
			}
			cur.Binary = true
			patchInfo = false
			cur = nil
			continue
		}
	}
	return files, nil
}

// parseHunkHeader matches ^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@[ ]?(.*)
// with Python's Unicode \d; missing lengths are 1.
func parseHunkHeader(line string) (*Hunk, bool) {
	s := line[len("@@ -"):]
	num := func(s string) (string, string, bool) {
		i := 0
		var digits []byte
		for i < len(s) {
			r, size := utf8.DecodeRuneInString(s[i:])
			if !unicode.IsDigit(r) {
				break
			}
			digits = append(digits, byte('0'+digitValue(r)))
			i += size
		}
		if i == 0 {
			return "", s, false
		}
		d := strings.TrimLeft(string(digits), "0")
		if d == "" {
			d = "0"
		}
		return d, s[i:], true
	}
	h := &Hunk{SourceLength: "1", TargetLength: "1"}
	var ok bool
	if h.SourceStart, s, ok = num(s); !ok {
		return nil, false
	}
	if strings.HasPrefix(s, ",") {
		var l string
		if l, s, ok = num(s[1:]); !ok {
			return nil, false
		}
		h.SourceLength = l
	}
	if !strings.HasPrefix(s, " +") {
		return nil, false
	}
	if h.TargetStart, s, ok = num(s[2:]); !ok {
		return nil, false
	}
	if strings.HasPrefix(s, ",") {
		var l string
		if l, s, ok = num(s[1:]); !ok {
			return nil, false
		}
		h.TargetLength = l
	}
	if !strings.HasPrefix(s, " @@") {
		return nil, false
	}
	s = strings.TrimPrefix(s[3:], " ")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	h.Section = s
	return h, true
}

// digitValue is the decimal value of a Unicode Nd character: Nd characters
// come in runs of ten, from 0 to 9.
func digitValue(r rune) int {
	if r >= '0' && r <= '9' {
		return int(r - '0')
	}
	k := 0
	for unicode.IsDigit(r - rune(k) - 1) {
		k++
	}
	return k % 10
}

// count parses a normalized decimal length; ok is false when it is too large
// for any real diff.
func count(d string) (int, bool) {
	if len(d) > 12 {
		return 0, false
	}
	v := 0
	for i := 0; i < len(d); i++ {
		v = v*10 + int(d[i]-'0')
	}
	return v, true
}

// parseHunkBody reads hunk lines starting at lines[i] until the counts in the
// header are met; it returns the index of the first line after the hunk.
func parseHunkBody(h *Hunk, lines []string, i int) (int, error) {
	srcLen, ok1 := count(h.SourceLength)
	tgtLen, ok2 := count(h.TargetLength)
	if !ok1 || !ok2 {
		return 0, &ParseError{i, "hunk is shorter than expected"}
	}
	src, tgt := 0, 0
	for ; i < len(lines); i++ {
		line := lines[i]
		var l Line
		switch c := line[0]; c {
		case '-', ' ', '+', '\\':
			l = Line{line[:1], line[1:]}
		case '\r', '\n':
			v := line[:1]
			if len(line) > 1 && (line[1] == '\r' || line[1] == '\n') {
				v = line[:2]
			}
			l = Line{" ", v}
		default:
			return 0, &ParseError{i + 1, fmt.Sprintf("hunk diff line expected: %q", line)}
		}
		switch l.Type {
		case "+":
			tgt++
		case "-":
			src++
		case " ":
			src++
			tgt++
		}
		if src > srcLen || tgt > tgtLen {
			return 0, &ParseError{i + 1, "hunk is longer than expected"}
		}
		h.Lines = append(h.Lines, l)
		if src == srcLen && tgt == tgtLen {
			i++
			break
		}
	}
	if src < srcLen || tgt < tgtLen {
		return 0, &ParseError{i, "hunk is shorter than expected"}
	}
	return i, nil
}

// isPySpace reports whether Python's str.isspace holds for r.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// PyStrip is Python's str.strip() with no arguments.
func PyStrip(s string) string {
	return strings.TrimFunc(s, isPySpace)
}

// FileLevel is the SWE-RL reference's get_filelevel_diff: path → the file's
// normalized change, the hunks re-rendered and stripped, joined with "\n",
// behind a "rename from SRC to TGT" header for renames. Binary files are
// skipped; a later entry for the same path replaces an earlier one. A diff
// unidiff cannot parse yields an empty map and the parse error.
func FileLevel(text string) (map[string]string, error) {
	files, err := Parse(text)
	if err != nil {
		return map[string]string{}, err
	}
	out := make(map[string]string, len(files))
	for _, f := range files {
		if f.Binary {
			continue
		}
		header, path := "", ""
		if f.IsRename() {
			src, tgt := strings.TrimPrefix(f.Source, "a/"), strings.TrimPrefix(f.Target, "b/")
			header = "rename from " + src + " to " + tgt
			path = src
		} else {
			path = f.Path()
		}
		var sb strings.Builder
		sb.WriteString(header)
		sb.WriteByte('\n')
		for i, h := range f.Hunks {
			if i > 0 {
				sb.WriteByte('\n')
			}
			sb.WriteString(PyStrip(h.String()))
		}
		out[path] = PyStrip(sb.String())
	}
	return out, nil
}
