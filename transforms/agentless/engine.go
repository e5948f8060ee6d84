package agentless

import "swerl/internal/pyast"

// goEngine is the Python engine written in Go (internal/pyast).
type goEngine struct{}

func (goEngine) Parses(code string) bool {
	_, err := pyast.Parse(code)
	return err == nil
}

func (goEngine) Unparse(code string) (string, error) {
	mod, err := pyast.Parse(code)
	if err != nil {
		return "", err
	}
	return pyast.Unparse(mod)
}

func (goEngine) RemoveCommentsAndDocstrings(code string) (string, error) {
	return pyast.RemoveCommentsAndDocstrings(code)
}

func (goEngine) Functions(code string) (map[string]string, error) {
	mod, err := pyast.Parse(code)
	if err != nil {
		return nil, err
	}
	return pyast.Functions(mod)
}

// DefaultEngine is the Python engine normalization and the syntax check
// use: a Go parser and unparser, so no python3 is needed at scoring time.
func DefaultEngine() Engine { return goEngine{} }
