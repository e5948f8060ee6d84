// Package window cuts mined instances into hunk-sized tasks for small
// policies.
//
// A real pull request's files are far longer than a small model's context
// (the built-in tiny model sees 1,024 tokens). Hunks splits an instance into
// one instance per change hunk: the code context is the hunk's lines of the
// file before the change (the change plus Context unchanged lines on each
// side), and the oracle new content the same window after the change. Since
// the lines outside a window are equal before and after, the window's diff
// is exactly that hunk of the full diff, so the SWE-RL reward on a hunk
// instance is the ordinary reward of the hunk task; a multi-hunk change
// becomes several tasks, each asking for one part of it. This is a
// deviation from the paper made for small models only; full instances are
// kept untouched in DIR/instances and large models use them directly.
package window

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"swerl/internal/defaults"
	"swerl/internal/difflib"
	"swerl/schemas"
)

// Options bound the hunk instances.
type Options struct {
	// Context is the number of unchanged lines kept on each side of a
	// change. Default 3.
	Context int
	// MaxBytes drops a hunk whose before or after window is longer.
	// Default 1200.
	MaxBytes int
	// MaxIssueBytes cuts the problem statement (at a rune boundary).
	// Default 400.
	MaxIssueBytes int
	// MaxPerInstance keeps at most this many hunks of one instance, in
	// path and line order. Default 8.
	MaxPerInstance int
}

func (o Options) withDefaults() Options {
	o.Context = defaults.Positive(o.Context, 3)
	o.MaxBytes = defaults.Positive(o.MaxBytes, 1200)
	o.MaxIssueBytes = defaults.Positive(o.MaxIssueBytes, 400)
	o.MaxPerInstance = defaults.Positive(o.MaxPerInstance, 8)
	return o
}

// Hunks returns the hunk instances of in, with ids "<id>/<path>:<line>"
// (the 1-based first line of the window in the file before the change),
// and how many hunks were dropped as too large.
func Hunks(in *schemas.Instance, o Options) (out []schemas.Instance, dropped int) {
	o = o.withDefaults()
	issue := cut(in.ProblemStatement, o.MaxIssueBytes)
	for _, p := range schemas.SortedPaths(in.OracleNewContent) {
		a := difflib.SplitLines(in.CodeContext[p], true)
		b := difflib.SplitLines(in.OracleNewContent[p], true)
		m := difflib.NewLines(a, b, false)
		for _, g := range m.GroupedOpCodes(o.Context) {
			i1, i2, j1, j2 := g[0].I1, g[len(g)-1].I2, g[0].J1, g[len(g)-1].J2
			before, after := strings.Join(a[i1:i2], ""), strings.Join(b[j1:j2], "")
			if len(before) > o.MaxBytes || len(after) > o.MaxBytes {
				dropped++
				continue
			}
			if len(out) >= o.MaxPerInstance {
				dropped++
				continue
			}
			h := *in
			h.ID = fmt.Sprintf("%s/%s:%d", in.ID, p, i1+1)
			h.ProblemStatement = issue
			h.CodeContext = map[string]string{p: before}
			h.OracleNewContent = map[string]string{p: after}
			h.OraclePatch = ""
			h.RelevantFiles = nil
			h.Stats = schemas.ChangeStats{FilesChanged: 1, Hunks: 1}
			for _, op := range g {
				switch op.Tag {
				case 'r':
					h.Stats.LinesDeleted += op.I2 - op.I1
					h.Stats.LinesAdded += op.J2 - op.J1
				case 'd':
					h.Stats.LinesDeleted += op.I2 - op.I1
				case 'i':
					h.Stats.LinesAdded += op.J2 - op.J1
				}
			}
			out = append(out, h)
		}
	}
	return out, dropped
}

// cut shortens s to at most n bytes at a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
