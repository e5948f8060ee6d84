package agentless

import "errors"

// errNoPython is returned by the engine while no Python parser is linked.
var errNoPython = errors.New("no Python parser: ast.unparse is not implemented")

// noEngine stands in for a Python implementation: nothing parses.
type noEngine struct{}

func (noEngine) Parses(string) bool             { return true }
func (noEngine) Unparse(string) (string, error) { return "", errNoPython }
func (noEngine) RemoveCommentsAndDocstrings(string) (string, error) {
	return "", errNoPython
}
func (noEngine) Functions(string) (map[string]string, error) { return nil, errNoPython }

// DefaultEngine is the Python engine normalization and the syntax check use.
func DefaultEngine() Engine { return noEngine{} }
