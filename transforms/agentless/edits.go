// Package agentless is Agentless Mini, the scaffold SWE-RL was evaluated
// with (facebookresearch/swe-rl, src/swerl/agentless_mini): the repair
// step's post-processing of a model answer into a patch (SEARCH/REPLACE
// blocks in ```python fences), the patch normalization used for voting, and
// the majority vote. Each function mirrors the released Python code rule
// for rule, including its quirks, because predictions are compared with
// the paper's numbers; the conformance vectors in testdata pin them down.
package agentless

import (
	"regexp"
	"strings"
	"unicode"

	"swerl/internal/difflib"
	"swerl/internal/xdiff"
)

const (
	searchMarker  = "<<<<<<< SEARCH"
	replaceMarker = ">>>>>>> REPLACE"
	divider       = "\n=======\n"
)

// pythonBlock is extract_python_blocks' pattern: the shortest text between
// "```python\n" and "\n```", blocks taken left to right without overlap.
var pythonBlock = regexp.MustCompile("(?s)```python\n(.*?)\n```")

// ExtractPythonBlocks returns the bodies of the ```python fences of text.
func ExtractPythonBlocks(text string) []string {
	var out []string
	for _, m := range pythonBlock.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// isPySpace is Python's str.isspace for one rune: Unicode whitespace plus
// the ASCII separators \x1c-\x1f that Go's unicode.IsSpace leaves out.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// pyStrip is Python's str.strip() with no argument.
func pyStrip(s string) string { return strings.TrimFunc(s, isPySpace) }

// FileEdits is the edit commands of one file, in the order the answer
// gives them.
type FileEdits struct {
	Path     string
	Commands []string // each "<<<<<<< SEARCH...\n>>>>>>> REPLACE"
}

// SplitMultifileCommands is split_edit_multifile_commands: every block is
// cut at ">>>>>>> REPLACE"; a piece with text before its "<<<<<<< SEARCH"
// names the file (leading '#'s and whitespace dropped) for itself and the
// pieces after it in the same block; pieces before any name, and pieces
// with more or fewer than one SEARCH marker, are dropped; an identical
// command for the same file is kept once. Files keep first-seen order.
func SplitMultifileCommands(blocks []string) []FileEdits {
	var out []FileEdits
	index := map[string]int{}
	for _, block := range blocks {
		name := ""
		pieces := strings.Split(block, replaceMarker)
		for _, sub := range pieces[:len(pieces)-1] {
			sub = pyStrip(sub)
			parts := strings.Split(sub, searchMarker)
			if len(parts) > 1 {
				if fn := pyStrip(strings.TrimLeft(parts[0], "#")); fn != "" {
					name = fn
				}
			}
			if len(parts) != 2 {
				continue
			}
			cmd := searchMarker + parts[1] + "\n" + replaceMarker
			if name == "" {
				continue
			}
			i, ok := index[name]
			if !ok {
				index[name] = len(out)
				out = append(out, FileEdits{Path: name, Commands: []string{cmd}})
				continue
			}
			dup := false
			for _, c := range out[i].Commands {
				if c == cmd {
					dup = true
					break
				}
			}
			if !dup {
				out[i].Commands = append(out[i].Commands, cmd)
			}
		}
	}
	return out
}

// ApplyCommands is parse_diff_edit_commands: a command's first and last
// lines (the markers) are dropped, the rest must split at "\n=======\n"
// into exactly SEARCH and REPLACE, and its SEARCH must occur in the
// original content; the accepted commands then replace every occurrence
// of their SEARCH, in order, each in the text the previous ones left.
func ApplyCommands(commands []string, content string) string {
	type edit struct{ search, replace string }
	var accepted []edit
	for _, c := range commands {
		lines := difflib.SplitLines(c, false)
		body := ""
		if len(lines) > 2 {
			body = strings.Join(lines[1:len(lines)-1], "\n")
		}
		parts := strings.Split(body, divider)
		if len(parts) != 2 {
			continue
		}
		if strings.Contains(content, parts[0]) {
			accepted = append(accepted, edit{parts[0], parts[1]})
		}
	}
	for _, e := range accepted {
		content = strings.ReplaceAll(content, e.search, e.replace)
	}
	return content
}

// SyntaxChecker reports whether code parses as Python (ast.parse).
type SyntaxChecker func(code string) bool

// Repair is one model answer turned into patches, as repair.py's
// post_process_raw_output and post_process_repair leave it.
type Repair struct {
	// ModelPatch is the patch to submit: "" when nothing applied, when a
	// patched file does not parse, or when the files differ only by blank
	// lines.
	ModelPatch string
	// RawModelPatch is the patch before those checks.
	RawModelPatch string
	EditedFiles   []string
	// Originals and NewContents are the edited files' texts before and
	// after, in EditedFiles order.
	Originals   []string
	NewContents []string
	// Dropped says why ModelPatch is empty ("" when it is not).
	Dropped string
}

// Dropped reasons.
const (
	DropNoEdit      = "no edit applies"
	DropSyntax      = "patched file does not parse"
	DropBlankLines  = "changes only blank lines"
	DropEmptyAnswer = "empty answer"
)

// ApplyAnswer applies a model answer's edits to files (path to the text as
// Agentless Mini holds it: "\n".join(text.splitlines())). Edits to files
// not in files are ignored. parses decides ast.parse success.
func ApplyAnswer(answer string, files map[string]string, parses SyntaxChecker) Repair {
	var r Repair
	if answer == "" {
		r.Dropped = DropEmptyAnswer
		return r
	}
	for _, fe := range SplitMultifileCommands(ExtractPythonBlocks(answer)) {
		content, ok := files[fe.Path]
		if !ok {
			continue
		}
		nc := ApplyCommands(fe.Commands, content)
		if fe.Path == "" || nc == "" {
			continue
		}
		r.EditedFiles = append(r.EditedFiles, fe.Path)
		r.Originals = append(r.Originals, content)
		r.NewContents = append(r.NewContents, nc)
	}
	diffs := make([]xdiff.FileDiff, len(r.EditedFiles))
	for i := range r.EditedFiles {
		diffs[i] = xdiff.FileDiff{Path: r.EditedFiles[i], Old: r.Originals[i], New: r.NewContents[i]}
	}
	raw := "\n" + strings.ReplaceAll(xdiff.GitDiff(diffs), "\\ No newline at end of file\n", "")
	r.RawModelPatch = strings.TrimLeftFunc(raw, isPySpace)

	syntaxOK := true
	for _, c := range r.NewContents {
		if pyStrip(c) == "" || !parses(c) {
			syntaxOK = false
			break
		}
	}
	var n1, n2 strings.Builder
	for i := range r.NewContents {
		n1.WriteString(removeEmptyLines(r.NewContents[i]))
		n2.WriteString(removeEmptyLines(r.Originals[i]))
	}
	switch {
	case !syntaxOK:
		r.Dropped = DropSyntax
	case n1.String() == n2.String():
		if len(r.EditedFiles) == 0 {
			r.Dropped = DropNoEdit
		} else {
			r.Dropped = DropBlankLines
		}
	default:
		r.ModelPatch = r.RawModelPatch
	}
	return r
}

// removeEmptyLines drops the lines that are only whitespace and joins the
// rest with "\n" (remove_empty_lines).
func removeEmptyLines(code string) string {
	var kept []string
	for _, l := range difflib.SplitLines(code, false) {
		if pyStrip(l) != "" {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "\n")
}
