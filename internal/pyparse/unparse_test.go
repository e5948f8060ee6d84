package pyparse

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"swerl/internal/testenv"
)

// pythonUnparse asks CPython 3.11 (the test oracle only) for
// ast.unparse(ast.parse(s)) of each source; "" where either raises.
func pythonUnparse(t *testing.T, srcs []string) []*string {
	t.Helper()
	py := python311(t)
	const prog = `
import ast, json, sys, warnings
warnings.simplefilter("ignore")
out = []
for s in json.load(sys.stdin):
    try:
        out.append(ast.unparse(ast.parse(s)))
    except Exception:
        out.append(None)
json.dump(out, sys.stdout)
`
	in, _ := json.Marshal(srcs)
	cmd := exec.Command(py, "-c", prog)
	cmd.Stdin = strings.NewReader(string(in))
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	var out []*string
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// unparseCorpus exercises ast.unparse's rules: precedence, quoting,
// numbers, f-strings, definitions.
var unparseCorpus = []string{
	"x = 1, 2\nreturn a, b\nfor x in a, b: pass\nyield a, b\nx = yield\nx = (yield a)\nawait (a + b)",
	"a + b * c\n(a + b) * c\na ** b ** c\n(a ** b) ** c\n-a ** b\n(-a) ** b\nnot a and b or c\na and (b or c)\na if b else c if d else e\n(a if b else c) if d else e",
	"a < b < c\n(a < b) < c\na is not b\na not in b\nnot (a == b)\n~a + -b - +c\nx = lambda: 0\nx = lambda a, *b, c=1, **d: (a, b)\nf(lambda x: x)",
	"x = 'a\"b' + \"a'b\" + 'a\\'b\"c' + '\\n\\t\\x00\\x7f\\u1234é\\U0001F600' + b'\\x00\\xffab\\'' + u'u'",
	"x = 1_000 + 0x1F + 0o17 + 0b101 + 1.5 + 1e16 + 1e15 + 1.0 + .5 + 5. + 1e-5 + 1e-4 + 0.0001 + 123456789012345678901234567890 + 1e400 + 2j + 1.5j + 1e20j + 0.1 + 2.5e-10",
	"x = f'{a}b{c!r:>{w}}' + f'{x=}' + f\"{'q'}\" + f'{{}}' + f'''{a\n}''' + f'{a:%Y-%m}' + f'a\\nb{c}' + f'{ {1: 2} }' + f'{x = !s}'",
	"@dec\n@dec2(1)\nclass A(B, metaclass=M):\n    '''Doc.'''\n    x: int = 1\n    def f(self, a, /, b=2, *args, c, d=4, **kw) -> int:\n        \"\"\"Doc \"quoted\".\"\"\"\n        return a\n    async def g(self):\n        async with a as b, c:\n            async for x in y:\n                await x",
	"try:\n    pass\nexcept (A, B) as e:\n    raise X from e\nexcept C:\n    raise\nelse:\n    pass\nfinally:\n    pass\ntry:\n    pass\nexcept* E:\n    pass",
	"if a:\n    pass\nelif b:\n    pass\nelse:\n    if c:\n        pass\nwhile x:\n    break\nelse:\n    continue\nwith open(f) as g, h:\n    del a, b[1], c.d\n    global q\n    assert x, 'msg'",
	"match x:\n    case [1, *rest]:\n        pass\n    case {'a': 1, **kw}:\n        pass\n    case Point(x=0, y=1) | Point(1, 2) as p if p:\n        pass\n    case -1 | 1 + 2j | 'a' | None | a.b:\n        pass\n    case (a, b) | [c]:\n        pass\n    case _:\n        pass",
	"x = [i for i in range(3) if i if not i]\ny = {k: v for k, v in z.items()}\nz = {*a, *b}\nw = {**a, 'b': 1}\ng = (x async for x in y)\ns = set()\ne = {}\nt = ()\nu = (1,)\nv = a[1:2, ::3]\nv = a[1:2]\nv = a[:]\nv = a[b, c]\nv = a[()]\nv = a[(1, 2)]\nv = a[*b]",
	"from . import a\nfrom ..b.c import d as e, f\nimport a.b as c, d\nfrom x import *\nx += 1\nx //= 2\n(x): int\nx.y: int = 3\nprint(*a, **b, c=1)\nf(x for x in y)\n1 .real\n(1).real\n1.5.real\nx = (a := 1)\nif (n := len(a)) > 10: pass",
	"def f():\n    x = 1\n    '''not a docstring'''\n    return\nclass E(Exception):\n    '''only a docstring'''\nx = '''a\nb'''\ny = 'a\\nb'\nz = '\\r'\n'''module\nstring'''",
	"x = a.b.c(d)[e](f)\nx = (a + b).c\nx = (-1) ** 2\nx = 2 ** -1\nx = a @ b\nx = a | b ^ c & d << e >> f\nx = not not a\nx = -(-a)\nx = (yield)\nx = [*a, *b]\nx = (*a, *b)\n*a, b = c\n[a, b] = c\na, = b\na = b = c",
	"def f(*, a): pass\ndef g(a, /): pass\ndef h(a=1, /, b=2): pass\ndef i(*args: int, **kw: str): pass\nlambda *, a: a\nlambda a, /: a\nlambda: (yield)\nnonlocal x",
}

func TestUnparseAgreesWithCPython(t *testing.T) {
	srcs := append(vectorSources(t), unparseCorpus...)
	srcs = append(srcs, snippetCorpus...)
	want := pythonUnparse(t, srcs)
	bad := 0
	for i, s := range srcs {
		if want[i] == nil {
			continue
		}
		m, err := Parse(s)
		if err != nil {
			t.Errorf("Parse: %v\n%s", err, s)
			bad++
			continue
		}
		got, err := Unparse(m)
		if err != nil || got != *want[i] {
			bad++
			if bad <= 5 {
				t.Errorf("unparse differs (err %v):\n%s", err, firstDiff(got, *want[i]))
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d sources unparse differently", bad)
	}
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < min(len(g), len(w)); i++ {
		if g[i] != w[i] {
			return "line " + itoa(i+1) + ":\n ours: " + g[i] + "\n want: " + w[i]
		}
	}
	return "lengths " + itoa(len(g)) + " vs " + itoa(len(w))
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestStdlibAgreesWithCPython parses and unparses every module of the
// oracle's own standard library (about a thousand files, test suite
// included) and compares with CPython: acceptance and unparse text.
func TestStdlibAgreesWithCPython(t *testing.T) {
	if testing.Short() {
		t.Skip("long: the whole standard library")
	}
	files := stdlibFiles(t)
	var srcs []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, string(b))
	}
	want := pythonUnparse(t, srcs)
	bad := 0
	for i, s := range srcs {
		m, err := Parse(s)
		if (err == nil) != (want[i] != nil) {
			bad++
			t.Errorf("%s: Parse: %v; CPython accepts: %v", files[i], err, want[i] != nil)
			continue
		}
		if err != nil {
			continue
		}
		got, err := Unparse(m)
		if err != nil || got != *want[i] {
			bad++
			if bad <= 10 {
				t.Errorf("%s: unparse differs (err %v):\n%s", files[i], err, firstDiff(got, *want[i]))
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d files disagree", bad, len(srcs))
	}
}

// stdlibFiles lists the modules of the oracle's standard library (one
// directory deep, test suite included); it skips without python3.
func stdlibFiles(t *testing.T) []string {
	t.Helper()
	py := python311(t)
	out, err := exec.Command(py, "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := strings.TrimSpace(string(out))
	files, _ := filepath.Glob(filepath.Join(dir, "*.py"))
	more, _ := filepath.Glob(filepath.Join(dir, "*", "*.py"))
	files = append(files, more...)
	if len(files) < 100 {
		testenv.Missing(t, "Python 3.11's standard library (found "+strconv.Itoa(len(files))+" modules under "+dir+")", "apt-get install -y python3.11")
	}
	return files
}
