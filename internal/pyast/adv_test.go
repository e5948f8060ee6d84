package pyast

import (
	"strings"
	"testing"
	"time"
)

// TestAdversarialInputsAreFast: nesting and backtracking points (with,
// match, f-strings) parse in time linear-ish in their size.
func TestAdversarialInputsAreFast(t *testing.T) {
	inputs := []string{
		"with " + strings.Repeat("(", 2000) + "a" + strings.Repeat(")", 2000) + ": pass\n",
		"with " + strings.Repeat("(", 2000) + "a\n",
		"match " + strings.Repeat("(", 2000) + "a" + strings.Repeat(")", 2000) + "\n",
		"match " + strings.Repeat("[", 2000) + "\n",
		"x = " + strings.Repeat("f'{", 30) + "1" + strings.Repeat("}'", 30) + "\n",
		strings.Repeat("if x:\n    match y:\n        case 1:\n            ", 1) + "pass\n",
		"x = " + strings.Repeat("-", 5000) + "1\n",
		"x = " + strings.Repeat("a if b else ", 2000) + "c\n",
		"x = " + strings.Repeat("lambda: ", 2000) + "c\n",
		"with (a, (b, (c, (d, (e, (f, (g, (h, (i, (j, (k, (l, (m, (n, (o, (p, (q, (r, (s, (t, (u, (v, (w, (x, (y, (z as q)))))))))))))))))))))))))): pass\n",
	}
	for i, in := range inputs {
		start := time.Now()
		if m, err := Parse(in); err == nil {
			Unparse(m)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("input %d took %s", i, d)
		}
	}
}
