package beamrun

import "strings"

// RootCause is what a failed pipeline's error says of the cause: the last
// line holding one of prefixes, from after the first of them on the line
// (a DoFn's error starts with its package's "name: ", such as "mine:
// staging: write FILE: no space left on device"), without the runner's
// plan dump and wrappers around it; the whole error when no line holds
// one.
func RootCause(err error, prefixes ...string) string {
	lines := strings.Split(err.Error(), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		at, n := -1, 0
		for _, p := range prefixes {
			if j := strings.Index(l, p); j >= 0 && (at < 0 || j < at) {
				at, n = j, len(p)
			}
		}
		if at >= 0 && at+n < len(l) {
			return l[at+n:]
		}
	}
	return err.Error()
}
