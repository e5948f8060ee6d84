package beamrun

import "strings"

// RootCause is what a failed pipeline's error says of the cause: the text
// after prefix on the last line holding it (a pipeline's DoFns start their
// errors with their package's "name: ", such as "mine: staging: write
// FILE: no space left on device"), without the runner's plan dump and
// wrappers around it; the whole error when no line holds prefix.
func RootCause(err error, prefix string) string {
	lines := strings.Split(err.Error(), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if _, cause, ok := strings.Cut(l, prefix); ok && cause != "" {
			return cause
		}
	}
	return err.Error()
}
