package agentless

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Engine is what normalization needs from a Python implementation:
// ast.parse success, ast.unparse output, remove_comments_and_docstrings,
// and the top-level function and method sources get_functions collects.
type Engine interface {
	Parses(code string) bool
	Unparse(code string) (string, error)
	RemoveCommentsAndDocstrings(code string) (string, error)
	Functions(code string) (map[string]string, error)
}

// CheckLine is one conformance line's input fields (README of the vectors).
type CheckLine struct {
	ID                   string            `json:"id"`
	Kind                 string            `json:"kind"`
	Files                map[string]string `json:"files"`
	Edits                string            `json:"edits"`
	NewFiles             map[string]string `json:"new_files"`
	EditedFiles          []string          `json:"edited_files"`
	Patch                string            `json:"patch"`
	CandidatesNormalized []string          `json:"candidates_normalized"`
}

// ApplyResult is the result of an apply line.
type ApplyResult struct {
	ModelPatch    string       `json:"model_patch"`
	RawModelPatch string       `json:"raw_model_patch"`
	EditedFiles   []string     `json:"edited_files"`
	NewFiles      orderedTexts `json:"new_files"`
}

// orderedTexts is a JSON object whose keys keep the given order, as the
// Python dict of the reference keeps insertion order.
type orderedTexts struct {
	keys []string
	vals map[string]string
}

func (o orderedTexts) MarshalJSON() ([]byte, error) {
	buf := []byte{'{'}
	for i, k := range o.keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		vb, err := json.Marshal(o.vals[k])
		if err != nil {
			return nil, err
		}
		buf = append(buf, kb...)
		buf = append(buf, ':')
		buf = append(buf, vb...)
	}
	return append(buf, '}'), nil
}

// CheckOutput is one output line of `swerl agentless check`.
type CheckOutput struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Result any    `json:"result"`
	// Error names why a line got no result (null result); not part of the
	// reference output, so a matching checker leaves it out.
	Error string `json:"error,omitempty"`
}

// Eval computes one line's result with eng as the Python engine.
func Eval(l CheckLine, eng Engine) (any, error) {
	switch l.Kind {
	case "apply":
		r := ApplyAnswer(l.Edits, l.Files, eng.Parses)
		res := ApplyResult{ModelPatch: r.ModelPatch, RawModelPatch: r.RawModelPatch,
			EditedFiles: r.EditedFiles, NewFiles: orderedTexts{vals: map[string]string{}}}
		if res.EditedFiles == nil {
			res.EditedFiles = []string{}
		}
		for i, p := range r.EditedFiles {
			if _, dup := res.NewFiles.vals[p]; !dup {
				res.NewFiles.keys = append(res.NewFiles.keys, p)
			}
			res.NewFiles.vals[p] = r.NewContents[i]
		}
		return res, nil
	case "vote":
		i := MajorityVote(l.CandidatesNormalized)
		if i < 0 {
			return nil, nil
		}
		return i, nil
	case "normalize":
		olds := make([]string, len(l.EditedFiles))
		news := make([]string, len(l.EditedFiles))
		for i, p := range l.EditedFiles {
			o, ok := l.Files[p]
			if !ok {
				return nil, fmt.Errorf("edited file %q not in files", p)
			}
			n, ok := l.NewFiles[p]
			if !ok {
				return nil, fmt.Errorf("edited file %q not in new_files", p)
			}
			olds[i], news[i] = o, n
		}
		s, err := NormalizePatch(l.Patch, olds, news, l.EditedFiles, eng)
		if errors.Is(err, ErrReferenceRaises) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return s, nil
	default:
		return nil, fmt.Errorf("unknown kind %q (want normalize, apply or vote)", l.Kind)
	}
}

// Check reads conformance lines from r and writes one output line each,
// in order. A line that cannot be read or computed gets a null result and
// an error naming why; Check returns the count of such lines in its error
// after writing every line.
func Check(r io.Reader, w io.Writer, eng Engine) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	failed := 0
	n := 0
	var firstErr error
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var l CheckLine
		out := CheckOutput{}
		if err := json.Unmarshal(line, &l); err != nil {
			out.Error = fmt.Sprintf("line %d: %v", n, err)
		} else {
			out.ID, out.Kind = l.ID, l.Kind
			res, err := safeEval(l, eng)
			if err != nil {
				out.Error = fmt.Sprintf("line %d (%s): %v", n, l.ID, err)
			}
			out.Result = res
		}
		if out.Error != "" {
			failed++
			if firstErr == nil {
				firstErr = errors.New(out.Error)
			}
		}
		if err := enc.Encode(out); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading line %d: %w", n+1, err)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d lines without a result, first: %w", failed, firstErr)
	}
	return nil
}

// safeEval is Eval with a panic (a bug) turned into the line's error.
func safeEval(l CheckLine, eng Engine) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("internal error: %v", r)
		}
	}()
	return Eval(l, eng)
}
