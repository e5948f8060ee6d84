package pyparse

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"

	"swerl/internal/testenv"
)

// vectorSources are the Python texts held by the Agentless conformance
// vectors: flask's sources, their edited versions and synthetic files,
// some of which do not parse.
func vectorSources(t testing.TB) []string {
	t.Helper()
	f, err := os.Open("../../transforms/agentless/testdata/vectors.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	add := func(m map[string]string) {
		for _, s := range m {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<28)
	for sc.Scan() {
		var v struct {
			Files, NewFiles, ExpectedNewFiles map[string]string
		}
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		add(v.Files)
		add(v.NewFiles)
		add(v.ExpectedNewFiles)
	}
	return out
}

// pythonAccepts asks CPython (the test oracle only) which sources
// ast.parse accepts.
func pythonAccepts(t *testing.T, srcs []string) []bool {
	t.Helper()
	py := python311(t)
	const prog = `
import ast, json, sys, warnings
warnings.simplefilter("ignore")
out = []
for s in json.load(sys.stdin):
    try:
        ast.parse(s)
        out.append(True)
    except (SyntaxError, ValueError):
        out.append(False)
json.dump(out, sys.stdout)
`
	in, _ := json.Marshal(srcs)
	cmd := exec.Command(py, "-c", prog)
	cmd.Stdin = strings.NewReader(string(in))
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	var ok []bool
	if err := json.Unmarshal(b, &ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// python311 is the test oracle, CPython 3.11 (the version whose ast.parse
// and ast.unparse Agentless Mini ran).
func python311(t *testing.T) string {
	t.Helper()
	py := testenv.Tool(t, "python3", "apt-get install -y python3.11")
	b, err := exec.Command(py, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "Python 3.11.") {
		testenv.Missing(t, "Python 3.11 as python3 (found "+strings.TrimSpace(string(b))+")", "apt-get install -y python3.11")
	}
	return py
}

// snippetCorpus is hand-written Python covering the grammar, valid and not.
var snippetCorpus = []string{
	"f(a=1, a=2)", "f(**k, *a)", "f(a=1, b)", "def f(a=1, b): pass", "f() = 1", "del f()",
	"(a, b) += 1", "x: int, y = 1", "a, *b, *c = d", "[*a] = b", `print "x"`, "f(x for x in y, 1)",
	"nonlocal x", "def f(a, a): pass", "class A(x for x in y): pass", "lambda: (yield)",
	"x = yield = 1", "a if b else c = 1", "*a = b", "*a, = b", "x = *a, *b", "return *a, b",
	`f"{}"`, `f"{a!x}"`, "0777", "1_000", "1__0", "1if x else y", "x = 0x_1f", "0b12", "1e", "1.e5j",
	"match x:\n    case [1, *rest] if rest:\n        pass\n    case {'a': 1, **kw}:\n        pass\n    case Point(x=0) | None as p:\n        pass\n    case _:\n        pass\n",
	"match = 1\nmatch.x = 2\nmatch(a)\n", "try:\n    pass\nexcept* E:\n    pass\n",
	"try:\n    pass\nexcept E, F:\n    pass\n", "with (a as b, c as d):\n    pass\n", "with (a, b):\n    pass\n",
	"async def f():\n    async with a as b:\n        await c\n    async for x in y:\n        yield x\n",
	"def f(a, /, b, *, c, **d) -> int: ...", "def f(*, **k): pass", "def f(/, a): pass", "lambda a, *b, c=1, **d: 0",
	"x = [i for i in range(3) if i]\ny = {k: v for k, v in z}\nz = {*a, *b}\nw = {**a, 'b': 1}\n",
	"x = (yield)", "x[1:2, ::3, ...] = 1", "x[*a] = 1", "if x:\npass\n", "if x:\n  a\n    b\n", "if x:\n    a\n  b\n",
	"if x:\n\ta\n        b\n", "s = 'abc\n'", "s = '''abc\n", "b = b'\\xff' b'é'", "s = 'a' b'b'", "s = '\\x4'",
	"s = f'{a:{b}>{c}}' f'{x=}' f'{x!r:>10}' f'{{}}' f'{a[\"k\"]}'", "s = f'{a:{b:{c:{d}}}}'", "s = f'{a\\n}'", "s = f'{#}'",
	"x = not", "x = a not b", "x = a is not b not in c", "x := 1", "(x := 1)", "f(x := 1)", "(a.b := 1)",
	"@dec\n@dec.a(1)[2]\nclass A(B, metaclass=M):\n    x: int = 1\n", "global a, b", "import a.b as c, d", "from . import (a, b,)",
	"from .a import b,", "from ... import *", "raise E from None", "assert x, 'm'", "del a, b[1], c.d,", "del (a, b), [c]",
	"del *a", "x = 1;", "x = 1;;", ";", "pass\n\\\n", "a = \\\n  1", "a = (1,\n# c\n 2)", "@\ndef f(): pass",
	"for x, in y: pass", "for *x, y in z: pass\nelse:\n    pass", "while x: pass\nelse: pass", "print(*a, **b, c=1)",
	"x = a if b else c if d else e", "x = lambda: lambda: 1", "x = -1 ** -2", "x = ~a @ b // c", "a < b < c == d",
	"x = ...", "x = [1, 2,]", "x = (1,)", "x = ()", "x = {}", "x = (*a)", "x = (*a,)", "def f(**a, b): pass",
	"def f(*a, *b): pass", "class A: pass\nclass B(): pass", "try:\n    pass\n", "try:\n    pass\nfinally:\n    pass\n",
	"else: pass", "if x: pass\nelif y: pass\nelse: pass", "x = 'a' 'b' f'c'", "x = yield", "await x", "x = [await y]",
	"def f(): return", "x: int", "(x): int = 1", "x.y: int", "x[0]: int", "[x]: int", "True = 1", "None = 1", "f(True=1)",
	"__debug__ = 1", "x = 1 if 2", "x = {a: b, c}", "x = {a, b: c}", "x = {**a, b}", "f(a for a in b)", "f(a for a in b,)",
	"x = 1\n  y = 2\n", "# only a comment", "", "\n\n", "x = 1 # c", "def f():\n    '''doc'''\n", "class C:\n    def f(self): pass\n\n    x = 1\n",
	"x = 1 +", "x = (1 +\n2)", "x = [\n1,\n2\n]", "if True:\n    x = (\n  1)\n", "x = u'a' U'b' R'c' Rb'd' bR'e' Fr'f'",
	"x = ur'a'", "x = 0_0", "x = 00", "x = 01", "x = 1j + 1.5J + .5 + 5. + 1e-3 + 1_0.0_1e+1_0", "x = 0o17 + 0XfF + 0B1",
	"x = 1.__class__", "x = 1 .real", "x = a.1", "é = 1", "x = $", "x = `a`", "x = a <> b", "print >>f, x",
	"exec 'x'", "def f(x):\n    return x\n  # dedented comment\n", "x = (\n", "x = )", "x = [)", "s = '\\N{DASH}'", "s = b'\\N{DASH}'",
	"s = '\\u12'", "s = r'\\u12'", "s = '\\U0011ffff'", "with a as (b, c): pass", "with a as f(): pass", "for f() in x: pass",
	"[x for x in y for z in w if a if b]", "[*x for x in y]", "{**x for x in y}", "f(*a for a in b)", "x = a[b:c:d:e]",
	"x = yield from", "async = 1", "await = 1", "def f(a: int = 1, *args: str, b: int, **kw: dict) -> None: pass",
	"def f(*args: *Ts): pass", "x[a:b, c] = 1", "lambda *: 0", "lambda *, a: 0", "lambda a=1, b: 0", "lambda: yield",
	"class A(*b, **c): pass", "if x:\n    pass\n  else:\n    pass\n", "return", "break", "continue", "yield",
}

func TestAgreesWithCPython(t *testing.T) {
	srcs := append(vectorSources(t), snippetCorpus...)
	r := rand.New(rand.NewPCG(7, 8))
	// Mutations of real files: lines dropped or duplicated, characters
	// removed or inserted. Each result either parses or does not.
	files := vectorSources(t)
	n := 400
	if testing.Short() {
		n = 80
	}
	for range n {
		s := files[r.IntN(len(files))]
		ls := strings.Split(s, "\n")
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
			const ins = "()[]{}:,=\"'#\\ \t*@."
			ls[i] = ls[i][:j] + string(ins[r.IntN(len(ins))]) + ls[i][j:]
		case 4:
			ls[i] = "  " + ls[i]
		case 5:
			ls[i] = strings.TrimLeft(ls[i], " ")
		}
		srcs = append(srcs, strings.Join(ls, "\n"))
	}
	want := pythonAccepts(t, srcs)
	bad := 0
	for i, s := range srcs {
		err := Check(s)
		if (err == nil) != want[i] {
			bad++
			if bad <= 15 {
				show := s
				if len(show) > 300 {
					show = fmt.Sprintf("(%d bytes) ... %s", len(s), errContext(s, err))
				}
				t.Errorf("CPython accepts=%v, Check: %v\n%s", want[i], err, show)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d sources disagree with CPython", bad, len(srcs))
	}
}

func errContext(s string, err error) string {
	e, ok := err.(*Error)
	if !ok {
		return "(no error position)"
	}
	ls := strings.Split(s, "\n")
	lo, hi := max(0, e.Pos.Line-3), min(len(ls), e.Pos.Line+2)
	return strings.Join(ls[lo:hi], "\n")
}
