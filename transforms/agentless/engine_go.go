package agentless

import (
	"fmt"

	"swerl/internal/pyast"
)

// goEngine is the Python engine written in Go (internal/pyast). A panic
// inside the parser or unparser (a bug) becomes an error for that text,
// so one odd file cannot stop a check or a run.
type goEngine struct{}

func guard(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("internal error in the Python engine: %v", r)
	}
}

func (goEngine) Parses(code string) (ok bool) {
	var err error
	func() {
		defer guard(&err)
		_, err = pyast.Parse(code)
	}()
	return err == nil
}

func (goEngine) Unparse(code string) (s string, err error) {
	defer guard(&err)
	mod, err := pyast.Parse(code)
	if err != nil {
		return "", err
	}
	return pyast.Unparse(mod)
}

func (goEngine) RemoveCommentsAndDocstrings(code string) (s string, err error) {
	defer guard(&err)
	return pyast.RemoveCommentsAndDocstrings(code)
}

func (goEngine) Functions(code string) (m map[string]string, err error) {
	defer guard(&err)
	mod, err := pyast.Parse(code)
	if err != nil {
		return nil, err
	}
	return pyast.Functions(mod)
}

// DefaultEngine is the Python engine normalization and the syntax check
// use: a Go parser and unparser, so no python3 is needed at scoring time.
func DefaultEngine() Engine { return goEngine{} }
