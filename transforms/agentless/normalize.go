package agentless

import (
	"errors"
	"strings"

	"swerl/internal/difflib"
	"swerl/internal/xdiff"
)

// ErrReferenceRaises marks inputs on which Agentless Mini's own
// normalize_patch raises (a side that does not parse even before
// stripping, e.g. Python 2 text): there is no normalized patch.
var ErrReferenceRaises = errors.New("normalize_patch raises on this input (a side does not parse)")

// NormalizePatch is utils/data.py normalize_patch: per edited file, both
// sides go through ast.parse/ast.unparse (kept as they are when they do not
// parse), then comments and docstrings are removed (both sides keep them
// when either result no longer parses), the two are diffed as git does,
// and when the change only adds new functions the diff keeps just its '-'
// and '+' lines. The per-file diffs are glued in edited-files order.
func NormalizePatch(patch string, olds, news, edited []string, eng Engine) (string, error) {
	if pyStrip(patch) == "" {
		return "", nil
	}
	var out strings.Builder
	for i := range edited {
		oldC, newC := normalizeCode(olds[i], eng), normalizeCode(news[i], eng)
		rOld, rNew := oldC, newC
		if so, err := eng.RemoveCommentsAndDocstrings(oldC); err == nil && eng.Parses(so) {
			if sn, err := eng.RemoveCommentsAndDocstrings(newC); err == nil && eng.Parses(sn) {
				rOld, rNew = so, sn
			}
		}
		diff := xdiff.GitDiff([]xdiff.FileDiff{{Path: edited[i], Old: rOld, New: rNew}})
		justNew, err := isJustNewFunction(rOld, rNew, eng)
		if err != nil {
			return "", err
		}
		if justNew {
			var kept []string
			for _, l := range difflib.SplitLines(diff, false) {
				if strings.HasPrefix(l, "-") || strings.HasPrefix(l, "+") {
					kept = append(kept, l)
				}
			}
			diff = strings.Join(kept, "\n")
		}
		out.WriteString(diff)
	}
	return out.String(), nil
}

// normalizeCode is ast.unparse(ast.parse(code)), or code itself when it
// does not parse.
func normalizeCode(code string, eng Engine) string {
	if s, err := eng.Unparse(code); err == nil {
		return s
	}
	return code
}

// isJustNewFunction is is_just_new_function: true when no function or
// method was removed or changed and at least one was added.
func isJustNewFunction(code1, code2 string, eng Engine) (bool, error) {
	f1, err := eng.Functions(code1)
	if err != nil {
		return false, ErrReferenceRaises
	}
	f2, err := eng.Functions(code2)
	if err != nil {
		return false, ErrReferenceRaises
	}
	for k, v := range f1 {
		w, ok := f2[k]
		if !ok || w != v {
			return false, nil
		}
	}
	return len(f2) > len(f1), nil
}
