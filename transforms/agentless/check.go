package agentless

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// CheckLine is one output line of Check.
type CheckLine struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Result any    `json:"result"`
}

// CheckStats counts Check's lines by kind, the normalize lines whose result
// is null because normalization raised (as Agentless Mini does), and those
// left null because this normalizer cannot handle them.
type CheckStats struct {
	Lines       map[string]int
	Errors      map[string]int
	Unsupported map[string]int
}

// Run computes one vector's result: the ApplyResult (apply), the chosen
// index or nil (vote), the normalized patch or nil where Agentless Mini
// raises (normalize).
func Run(v *Vector) (any, error) {
	switch v.Kind {
	case "vote":
		if i, ok := Vote(v.CandidatesNormalized); ok {
			return i, nil
		}
		return nil, nil
	case "apply":
		if v.Edits == nil {
			return nil, errors.New("apply line without \"edits\"")
		}
		r := Apply(v.Files, *v.Edits)
		return r, nil
	case "normalize":
		if v.Patch == nil {
			return nil, errors.New("normalize line without \"patch\"")
		}
		p, err := NormalizePatch(*v.Patch, v.Files, v.NewFiles, v.EditedFiles)
		if err != nil {
			// Agentless Mini raises here (or this normalizer cannot
			// follow it): the result is null and the caller counts why.
			return nil, err
		}
		return p, nil
	default:
		return nil, fmt.Errorf("unknown kind %q", v.Kind)
	}
}

// Check reads conformance lines (input fields only are used) from in and
// writes one {"id","kind","result"} line each, in order, to out.
func Check(in io.Reader, out io.Writer) (CheckStats, error) {
	st := CheckStats{Lines: map[string]int{}, Errors: map[string]int{}, Unsupported: map[string]int{}}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<30)
	bw := bufio.NewWriter(out)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	n := 0
	for sc.Scan() {
		n++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var v Vector
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return st, fmt.Errorf("line %d: %v", n, err)
		}
		if v.ID == "" {
			return st, fmt.Errorf("line %d: no \"id\"", n)
		}
		res, err := Run(&v)
		switch {
		case err == nil:
		case v.Kind == "normalize" && errors.Is(err, ErrNormalizeUnsupported):
			st.Unsupported[v.Kind]++
		case v.Kind == "normalize" && errors.Is(err, ErrNormalizeRaises):
			st.Errors[v.Kind]++
		default:
			return st, fmt.Errorf("line %d (%s): %v", n, v.ID, err)
		}
		st.Lines[v.Kind]++
		if err := enc.Encode(CheckLine{v.ID, v.Kind, res}); err != nil {
			return st, fmt.Errorf("line %d (%s): %v", n, v.ID, err)
		}
	}
	if err := sc.Err(); err != nil {
		return st, fmt.Errorf("line %d: %v", n+1, err)
	}
	return st, bw.Flush()
}
