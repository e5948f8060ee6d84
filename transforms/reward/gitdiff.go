package reward

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"swerl/internal/difflib"
)

// GitDiff renders a git-compatible unified diff (diff --git headers,
// /dev/null for new files, 3 lines of context) from old to new contents;
// `git apply` accepts it. Every path of new is compared with old: a path
// missing from old is a new file, a path whose content is unchanged is left
// out, and paths only in old are untouched (so new may hold just the changed
// files, as ApplyAnswer returns them). Lines split at "\n" as git does; a last
// line without one gets git's "\ No newline at end of file" marker. Files are
// in path order.
func GitDiff(old, new map[string]string) string {
	var sb strings.Builder
	for _, p := range slices.Sorted(maps.Keys(new)) {
		oc, existed := old[p]
		nc := new[p]
		if existed && oc == nc {
			continue
		}
		a, b := gitQuote("a/"+p), gitQuote("b/"+p)
		sb.WriteString("diff --git " + a + " " + b + "\n")
		if !existed {
			sb.WriteString("new file mode 100644\n")
			if nc == "" {
				continue
			}
			sb.WriteString("--- /dev/null\n")
		} else {
			sb.WriteString("--- " + a + "\n")
		}
		sb.WriteString("+++ " + b + "\n")
		writeGitHunks(&sb, difflib.SplitAfterNewline(oc), difflib.SplitAfterNewline(nc))
	}
	return sb.String()
}

func writeGitHunks(sb *strings.Builder, a, b []string) {
	m := difflib.NewLines(a, b, true)
	groups := m.GroupedOpCodes(3)
	// The groups are plain indexes: the matcher's arrays (as long as the
	// files) go back to the pool for the next diff.
	m.Release()
	for _, g := range groups {
		difflib.EachHunkLine(a, b, g, func(prefix, l string) {
			sb.WriteString(prefix)
			if len(prefix) > 1 { // the "@@ -a,b +c,d @@" header
				sb.WriteByte('\n')
				return
			}
			sb.WriteString(l)
			if !strings.HasSuffix(l, "\n") {
				sb.WriteString("\n\\ No newline at end of file\n")
			}
		})
	}
}

// gitQuote quotes a path the way git does when it holds a double quote, a
// backslash or a control character.
func gitQuote(p string) string {
	need := false
	for i := 0; i < len(p); i++ {
		if c := p[i]; c == '"' || c == '\\' || c < 0x20 || c == 0x7f {
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
		switch c := p[i]; c {
		case '"':
			sb.WriteString(`\"`)
		case '\\':
			sb.WriteString(`\\`)
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
		default:
			if c < 0x20 || c == 0x7f {
				fmt.Fprintf(&sb, "\\%03o", c)
			} else {
				sb.WriteByte(c)
			}
		}
	}
	sb.WriteByte('"')
	return sb.String()
}
