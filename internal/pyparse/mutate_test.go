package pyparse

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// TestStdlibMutationsAgreeWithCPython: windows of the oracle's standard
// library modules, with lines dropped, doubled or re-indented and
// characters removed or inserted, are accepted by Check exactly when
// ast.parse accepts them.
func TestStdlibMutationsAgreeWithCPython(t *testing.T) {
	files := stdlibFiles(t)
	r := rand.New(rand.NewPCG(13, 14))
	var srcs []string
	for range 3000 {
		b, _ := os.ReadFile(files[r.IntN(len(files))])
		ls := strings.Split(string(b), "\n")
		// a window of the file, mutated
		lo := r.IntN(len(ls))
		hi := min(len(ls), lo+5+r.IntN(60))
		ls = append([]string(nil), ls[lo:hi]...)
		for range 1 + r.IntN(2) {
			if len(ls) == 0 {
				break
			}
			i := r.IntN(len(ls))
			switch r.IntN(6) {
			case 0:
				ls = append(ls[:i:i], ls[i+1:]...)
			case 1:
				ls = append(ls[:i+1:i+1], ls[i:]...)
			case 2:
				if len(ls[i]) > 0 {
					j := r.IntN(len(ls[i]))
					ls[i] = ls[i][:j] + ls[i][j+1:]
				}
			case 3:
				j := r.IntN(len(ls[i]) + 1)
				const ins = "()[]{}:,=\"'#\\ \t*@.fbr"
				ls[i] = ls[i][:j] + string(ins[r.IntN(len(ins))]) + ls[i][j:]
			case 4:
				ls[i] = "  " + ls[i]
			case 5:
				ls[i] = strings.TrimLeft(ls[i], " ")
			}
		}
		srcs = append(srcs, strings.Join(ls, "\n"))
	}
	want := pythonAccepts(t, srcs)
	bad := 0
	for i, s := range srcs {
		err := Check(s)
		if (err == nil) != want[i] {
			bad++
			if bad <= 12 {
				t.Errorf("CPython accepts=%v, Check: %v\n%s", want[i], err, s)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d disagree with CPython", bad, len(srcs))
	}
}
