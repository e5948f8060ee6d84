package agentless

import (
	"regexp"
	"strings"

	"swerl/internal/difflib"
	"swerl/internal/gitdiff"
	"swerl/internal/pyparse"
	"swerl/internal/unidiff"
)

// ApplyResult is what Agentless Mini's repair post-processing
// (repair.py post_process_raw_output) makes of one answer.
type ApplyResult struct {
	// ModelPatch is the patch, or "" when a result does not parse as
	// Python or differs from the original by blank lines only.
	ModelPatch string `json:"model_patch"`
	// RawModelPatch is the patch whatever the checks said.
	RawModelPatch string `json:"raw_model_patch"`
	// EditedFiles are the files the answer's edits changed, in the order
	// their first edit appears.
	EditedFiles []string `json:"edited_files"`
	// NewFiles holds each edited file's new text.
	NewFiles map[string]string `json:"new_files"`
}

var pythonBlock = regexp.MustCompile("(?s)```python\n(.*?)\n```")

// extractPythonBlocks is utils/data.py extract_python_blocks.
func extractPythonBlocks(text string) []string {
	var out []string
	for _, m := range pythonBlock.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

const (
	searchMark  = "<<<<<<< SEARCH"
	replaceMark = ">>>>>>> REPLACE"
	dividerMark = "\n=======\n"
)

// fileCommands is an ordered map from a file name to its edit commands.
type fileCommands struct {
	order []string
	cmds  map[string][]string
}

// splitEditMultifileCommands is split_edit_multifile_commands: the
// SEARCH/REPLACE commands of every block, by the file named before them
// (the name carries over within a block, not across blocks), identical
// commands for a file kept once.
func splitEditMultifileCommands(blocks []string) fileCommands {
	fc := fileCommands{cmds: map[string][]string{}}
	for _, block := range blocks {
		fileName := ""
		parts := strings.Split(block, replaceMark)
		for _, sub := range parts[:len(parts)-1] {
			sub = unidiff.PyStrip(sub)
			if strings.Contains(sub, searchMark) {
				fn := unidiff.PyStrip(strings.TrimLeft(strings.SplitN(sub, searchMark, 2)[0], "#"))
				if fn != "" {
					fileName = fn
				}
			}
			halves := strings.Split(sub, searchMark)
			if len(halves) != 2 {
				continue
			}
			cmd := searchMark + halves[1] + "\n" + replaceMark
			if fileName == "" {
				continue
			}
			prev, seen := fc.cmds[fileName]
			if !seen {
				fc.order = append(fc.order, fileName)
			}
			dup := false
			for _, c := range prev {
				if c == cmd {
					dup = true
					break
				}
			}
			if !dup {
				fc.cmds[fileName] = append(prev, cmd)
			}
		}
	}
	return fc
}

// parseDiffEditCommands is parse_diff_edit_commands: the commands whose
// SEARCH text occurs in the original content are applied in order, each
// replacing every occurrence in the text as already edited.
func parseDiffEditCommands(cmds []string, content string) string {
	type edit struct{ search, replace string }
	var can []edit
	for _, c := range cmds {
		lines := difflib.SplitLines(c, false)
		if len(lines) < 2 {
			lines = nil
		} else {
			lines = lines[1 : len(lines)-1]
		}
		body := strings.Join(lines, "\n")
		parts := strings.Split(body, dividerMark)
		if len(parts) != 2 {
			continue
		}
		if strings.Contains(content, parts[0]) {
			can = append(can, edit{parts[0], parts[1]})
		}
	}
	for _, e := range can {
		content = strings.ReplaceAll(content, e.search, e.replace)
	}
	return content
}

// Apply is Agentless Mini's repair post-processing of one answer: the
// ```python blocks are read, their SEARCH/REPLACE edits applied to files
// (path → text as Agentless holds it), and the change printed as `git
// diff` does. Files the answer names but files lacks are ignored.
func Apply(files map[string]string, answer string) ApplyResult {
	res := ApplyResult{EditedFiles: []string{}, NewFiles: map[string]string{}}
	fc := splitEditMultifileCommands(extractPythonBlocks(answer))
	var olds, news []string
	for _, f := range fc.order {
		content, ok := files[f]
		if !ok {
			continue
		}
		nc := parseDiffEditCommands(fc.cmds[f], content)
		if nc == "" {
			continue
		}
		res.EditedFiles = append(res.EditedFiles, f)
		res.NewFiles[f] = nc
		olds = append(olds, content)
		news = append(news, nc)
	}
	diff := gitdiff.Files(res.EditedFiles, files, res.NewFiles)
	raw := "\n" + strings.ReplaceAll(diff, "\\ No newline at end of file\n", "")
	res.RawModelPatch = pyLStrip(raw)
	if checkSyntax(news) && !differByJustEmptyLines(news, olds) {
		res.ModelPatch = res.RawModelPatch
	}
	return res
}

func pyLStrip(s string) string {
	return strings.TrimLeftFunc(s, func(r rune) bool { return unidiff.PyStrip(string(r)) == "" })
}

// checkSyntax is check_syntax: every text is non-blank and parses.
func checkSyntax(codes []string) bool {
	for _, c := range codes {
		if unidiff.PyStrip(c) == "" || pyparse.Check(c) != nil {
			return false
		}
	}
	return true
}

// removeEmptyLines is remove_empty_lines.
func removeEmptyLines(code string) string {
	var keep []string
	for _, l := range difflib.SplitLines(code, false) {
		if unidiff.PyStrip(l) != "" {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// differByJustEmptyLines is check_code_differ_by_just_empty_lines.
func differByJustEmptyLines(codes, prev []string) bool {
	var a, b strings.Builder
	for i := range codes {
		a.WriteString(removeEmptyLines(codes[i]))
		b.WriteString(removeEmptyLines(prev[i]))
	}
	return a.String() == b.String()
}
