package prompt

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"swerl/internal/difflib"
	"swerl/schemas"
)

// blockRE is the reference reward's SEARCH_REPLACE_REGEX; OracleAnswer parses
// its own answer with it to prove the answer reads back as written.
var blockRE = regexp.MustCompile("```.*?\n### (.*)\n<<<<<<< SEARCH\n([\\s\\S]*?)\n=======\n([\\s\\S]*?)\n>>>>>>> REPLACE\n```")

// Edit is one search/replace block.
type Edit struct {
	Path, Search, Replace string
}

// OracleAnswer returns the ideal completion for in when the policy was shown
// files (Prompt.Files): a short thought, then one search/replace block per
// changed file that turns files into in.OracleNewContent, in the SWE-RL
// output format. A file the oracle changes but that was not shown is written
// whole with an empty SEARCH (the reward treats an unseen file as empty).
//
// Each block spans the changed lines plus the fewest context lines that make
// its SEARCH text occur exactly once in the file (the reward replaces every
// occurrence). The answer is checked before it is returned: parsed with the
// reward's regex and applied with the reward's semantics, it must reproduce
// the oracle contents exactly. It fails when it cannot (content holding the
// format's own delimiter lines or tags) or when the oracle changes nothing.
func OracleAnswer(in *schemas.Instance, files map[string]string) (string, error) {
	if in == nil {
		return "", errors.New("prompt: nil instance")
	}
	var edits []Edit
	var changed []string
	for _, path := range schemas.SortedPaths(in.OracleNewContent) {
		old, newc := files[path], in.OracleNewContent[path]
		if old == newc {
			continue
		}
		e, err := edit(path, old, newc)
		if err != nil {
			return "", fmt.Errorf("prompt: oracle answer for %s: %w", in.ID, err)
		}
		edits = append(edits, e)
		changed = append(changed, path)
	}
	if len(edits) == 0 {
		return "", fmt.Errorf("prompt: oracle answer for %s: the oracle changes none of the files", in.ID)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<think>\nThe issue is fixed by changing %d file(s): %s. I edit each one with a search/replace block anchored on lines that occur once in the file.\n</think>\n<solution>\n", len(changed), strings.Join(changed, ", "))
	for i, e := range edits {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(FormatEdit(e))
	}
	b.WriteString("\n</solution>")
	out := b.String()
	if err := check(out, edits, files, in.OracleNewContent); err != nil {
		return "", fmt.Errorf("prompt: oracle answer for %s: %w", in.ID, err)
	}
	return out, nil
}

// FormatEdit renders one block in the SWE-RL output format.
func FormatEdit(e Edit) string {
	return "```\n### " + e.Path + "\n<<<<<<< SEARCH\n" + e.Search + "\n=======\n" + e.Replace + "\n>>>>>>> REPLACE\n```"
}

func edit(path, old, newc string) (Edit, error) {
	ol, nl := difflib.SplitAfterNewline(old), difflib.SplitAfterNewline(newc)
	pre := 0
	for pre < len(ol) && pre < len(nl) && ol[pre] == nl[pre] {
		pre++
	}
	suf := 0
	for suf < len(ol)-pre && suf < len(nl)-pre && ol[len(ol)-1-suf] == nl[len(nl)-1-suf] {
		suf++
	}
	// Context: cb lines before (from the common prefix), ca after (from the
	// common suffix); grow both until SEARCH is non-empty (unless the file
	// is empty) and unique.
	for cb, ca := 0, 0; ; {
		s := strings.Join(ol[pre-cb:len(ol)-suf+ca], "")
		r := strings.Join(nl[pre-cb:len(nl)-suf+ca], "")
		// Prefer the block without its last line break (the usual look);
		// fall back to the full lines.
		try := [][2]string{{s, r}}
		if strings.HasSuffix(s, "\n") && strings.HasSuffix(r, "\n") {
			try = [][2]string{{s[:len(s)-1], r[:len(r)-1]}, {s, r}}
		}
		for _, c := range try {
			s, r := c[0], c[1]
			if s != r && (s != "" || old == "") && occurrences("\n"+old, "\n"+s) == 1 {
				return Edit{Path: path, Search: s, Replace: r}, nil
			}
		}
		grew := false
		if cb < pre {
			cb, grew = cb+1, true
		}
		if ca < suf {
			ca, grew = ca+1, true
		}
		if !grew {
			return Edit{}, fmt.Errorf("%s: no unique search text", path)
		}
	}
}

// occurrences counts the matches of sub in s, overlapping ones included: a
// block is safe only when its text matches at one place.
func occurrences(s, sub string) int {
	n := 0
	for {
		i := strings.Index(s, sub)
		if i < 0 {
			return n
		}
		n++
		s = s[i+1:]
	}
}

// check parses answer like the reward does and applies its blocks to files;
// the result must equal want on every path want changes.
func check(answer string, edits []Edit, files, want map[string]string) error {
	for _, tag := range []string{"<think>", "</think>", "<solution>", "</solution>"} {
		if n := strings.Count(answer, tag); n != 1 {
			return fmt.Errorf("tag %s occurs %d times (file contents hold the tag)", tag, n)
		}
	}
	got := blockRE.FindAllStringSubmatch(answer, -1)
	if len(got) != len(edits) {
		return fmt.Errorf("answer reads back as %d blocks, wrote %d (file contents hold delimiter lines)", len(got), len(edits))
	}
	for i, m := range got {
		if (Edit{m[1], m[2], m[3]}) != edits[i] {
			return fmt.Errorf("%s: block reads back differently (file contents hold delimiter lines)", edits[i].Path)
		}
		e := edits[i]
		content := strings.ReplaceAll("\n"+files[e.Path], "\n"+e.Search, "\n"+e.Replace)[1:]
		if content != want[e.Path] {
			return fmt.Errorf("%s: applying the block does not give the oracle content", e.Path)
		}
	}
	return nil
}
