// Package gitdiff prints unified diffs exactly as `git diff` (git 2.x,
// default settings) prints them for modified files: the "diff --git" and
// "index <blob>..<blob> 100644" headers, Myers' diff with xdiff's
// heuristics and the indent heuristic, 3 lines of context, hunk headers
// with git's default function-name line and "\ No newline at end of file".
//
// Agentless Mini gets its patches by writing the old and new texts into a
// scratch repository and running `git diff`; this package gives the same
// bytes without git.
package gitdiff

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Context is the number of context lines git prints around a change.
const Context = 3

// funcNameMax is the size of xdiff's function-name buffer: longer lines are
// cut to it.
const funcNameMax = 80

// BlobID is the git object name of a blob with this content.
func BlobID(content string) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write([]byte(content))
	return hex.EncodeToString(h.Sum(nil))
}

// SplitLines splits s into lines as xdiff does: after every "\n", with a
// last line without one if s does not end in "\n".
func SplitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// Files is `git diff` in a repository whose committed files are old and
// whose work tree holds new: every path of paths whose content differs, in
// git's path order (bytewise). A path missing from old or new is taken as
// an empty file, as Agentless Mini's scratch repository would hold it.
func Files(paths []string, old, new map[string]string) string {
	ps := slices.Clone(paths)
	slices.Sort(ps)
	ps = slices.Compact(ps)
	var sb strings.Builder
	for _, p := range ps {
		sb.WriteString(File(p, old[p], new[p]))
	}
	return sb.String()
}

// File is `git diff` of one modified file: "" when the contents are equal.
func File(path, old, new string) string {
	if old == new {
		return ""
	}
	var sb strings.Builder
	a, b := quotePath("a/"+path), quotePath("b/"+path)
	sb.WriteString("diff --git " + a + " " + b + "\n")
	sb.WriteString("index " + BlobID(old)[:7] + ".." + BlobID(new)[:7] + " 100644\n")
	if isBinary(old) || isBinary(new) {
		sb.WriteString("Binary files " + a + " and " + b + " differ\n")
		return sb.String()
	}
	sb.WriteString("--- " + a + tabIfSpace(a) + "\n")
	sb.WriteString("+++ " + b + tabIfSpace(b) + "\n")
	writeHunks(&sb, SplitLines(old), SplitLines(new))
	return sb.String()
}

// Hunks is the body of the diff of old and new: the hunks only, no headers.
func Hunks(old, new string) string {
	var sb strings.Builder
	writeHunks(&sb, SplitLines(old), SplitLines(new))
	return sb.String()
}

// isBinary is git's buffer_is_binary: a NUL in the first 8000 bytes.
func isBinary(s string) bool {
	return strings.IndexByte(s[:min(len(s), 8000)], 0) >= 0
}

func tabIfSpace(name string) string {
	if strings.IndexByte(name, ' ') >= 0 {
		return "\t"
	}
	return ""
}

// quotePath is git's quote_c_style with core.quotePath on: a name with a
// control character, a double quote, a backslash or a byte >= 0x80 is
// printed in double quotes with C escapes (octal for the others).
func quotePath(p string) string {
	need := false
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			need = true
			break
		}
	}
	if !need {
		return p
	}
	var sb strings.Builder
	sb.WriteByte('"')
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch c {
		case '\a':
			sb.WriteString(`\a`)
		case '\b':
			sb.WriteString(`\b`)
		case '\t':
			sb.WriteString(`\t`)
		case '\n':
			sb.WriteString(`\n`)
		case '\v':
			sb.WriteString(`\v`)
		case '\f':
			sb.WriteString(`\f`)
		case '\r':
			sb.WriteString(`\r`)
		case '"':
			sb.WriteString(`\"`)
		case '\\':
			sb.WriteString(`\\`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&sb, "\\%03o", c)
			} else {
				sb.WriteByte(c)
			}
		}
	}
	sb.WriteByte('"')
	return sb.String()
}

type change struct{ i1, i2, chg1, chg2 int }

// buildScript is xdl_build_script: the runs of changed lines, in order.
func buildScript(x1, x2 *xfile) []change {
	var rev []change
	i1, i2 := x1.nrec(), x2.nrec()
	for i1 >= 0 || i2 >= 0 {
		c1 := i1 >= 1 && x1.changed(i1-1)
		c2 := i2 >= 1 && x2.changed(i2-1)
		if c1 || c2 {
			l1, l2 := i1, i2
			for i1 >= 1 && x1.changed(i1-1) {
				i1--
			}
			for i2 >= 1 && x2.changed(i2-1) {
				i2--
			}
			rev = append(rev, change{i1, i2, l1 - i1, l2 - i2})
		}
		i1--
		i2--
	}
	slices.Reverse(rev)
	return rev
}

// diffScript runs the whole of xdl_diff up to the edit script.
func diffScript(a, b []string) (*xfile, *xfile, []change) {
	x1, x2 := doDiff(a, b)
	changeCompact(x1, x2)
	changeCompact(x2, x1)
	return x1, x2, buildScript(x1, x2)
}

// funcName is xdiff's def_ff: a line starting with a letter, '_' or '$',
// cut to 80 bytes, trailing whitespace removed.
func funcName(rec string) (string, bool) {
	if len(rec) == 0 {
		return "", false
	}
	c := rec[0]
	if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$') {
		return "", false
	}
	rec = rec[:min(len(rec), funcNameMax)]
	for len(rec) > 0 && isXSpace(rec[len(rec)-1]) {
		rec = rec[:len(rec)-1]
	}
	return rec, true
}

func writeRec(sb *strings.Builder, prefix, rec string) {
	sb.WriteString(prefix)
	sb.WriteString(rec)
	if !strings.HasSuffix(rec, "\n") {
		sb.WriteString("\n\\ No newline at end of file\n")
	}
}

func hunkRange(start, count int) string {
	if count == 0 {
		start--
	}
	if count == 1 {
		return strconv.Itoa(start)
	}
	return strconv.Itoa(start) + "," + strconv.Itoa(count)
}

// writeHunks is xdl_emit_diff with git's default settings.
func writeHunks(sb *strings.Builder, a, b []string) {
	x1, x2, script := diffScript(a, b)
	const maxCommon = 2 * Context // plus diff.interHunkContext, 0 by default
	for h := 0; h < len(script); {
		e := h // last change of this hunk
		for e+1 < len(script) && script[e+1].i1-(script[e].i1+script[e].chg1) <= maxCommon {
			e++
		}
		xch, xche := script[h], script[e]
		s1 := max(xch.i1-Context, 0)
		s2 := max(xch.i2-Context, 0)
		lctx := min(Context, x1.nrec()-(xche.i1+xche.chg1), x2.nrec()-(xche.i2+xche.chg2))
		e1 := xche.i1 + xche.chg1 + lctx
		e2 := xche.i2 + xche.chg2 + lctx
		sb.WriteString("@@ -" + hunkRange(s1+1, e1-s1) + " +" + hunkRange(s2+1, e2-s2) + " @@")
		for i := s1 - 1; i >= 0; i-- {
			if name, ok := funcName(x1.recs[i]); ok {
				sb.WriteString(" " + name)
				break
			}
		}
		sb.WriteByte('\n')
		for ; s1 < xch.i1; s1++ {
			writeRec(sb, " ", x1.recs[s1])
		}
		for k := h; k <= e; k++ {
			c := script[k]
			for ; s1 < c.i1; s1++ {
				writeRec(sb, " ", x1.recs[s1])
			}
			for i := c.i1; i < c.i1+c.chg1; i++ {
				writeRec(sb, "-", x1.recs[i])
			}
			for i := c.i2; i < c.i2+c.chg2; i++ {
				writeRec(sb, "+", x2.recs[i])
			}
			s1 = c.i1 + c.chg1
		}
		for ; s1 < e1; s1++ {
			writeRec(sb, " ", x1.recs[s1])
		}
		h = e + 1
	}
}
