package pyast

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"
)

// pythonOracle runs CPython on each source with script (which reads a JSON
// list of sources on stdin and prints a JSON list of results) and returns
// its results; it skips the test when python3 is not 3.11.
func pythonOracle(t *testing.T, script string, sources []string) []*string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: no CPython oracle")
	}
	ver, err := exec.Command(py, "-c", "import sys; print(sys.version_info[:2] == (3, 11))").Output()
	if err != nil || string(bytes.TrimSpace(ver)) != "True" {
		t.Skip("python3 is not 3.11: ast.unparse output differs between versions")
	}
	in, _ := json.Marshal(sources)
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	var res []*string
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

const unparseScript = `
import ast, json, sys
out = []
for s in json.load(sys.stdin):
    try:
        out.append(ast.unparse(ast.parse(s)))
    except Exception:
        out.append(None)
print(json.dumps(out))
`

func checkUnparse(t *testing.T, sources []string) {
	t.Helper()
	want := pythonOracle(t, unparseScript, sources)
	t.Logf("%d sources compared with CPython", len(sources))
	bad := 0
	for i, src := range sources {
		mod, err := Parse(src)
		if want[i] == nil {
			if err == nil {
				t.Errorf("source %d: CPython rejects it, we parse it\n%s", i, src)
				bad++
			}
			continue
		}
		if err != nil {
			t.Errorf("source %d: %v\n%s", i, err, src)
			bad++
			continue
		}
		got, err := Unparse(mod)
		if err != nil {
			t.Errorf("source %d: unparse: %v", i, err)
			bad++
			continue
		}
		if got != *want[i] {
			bad++
			gl, wl := splitKeep(got), splitKeep(*want[i])
			for j := 0; j < len(gl) || j < len(wl); j++ {
				var g, w string
				if j < len(gl) {
					g = gl[j]
				}
				if j < len(wl) {
					w = wl[j]
				}
				if g != w {
					t.Errorf("source %d: line %d differs\n got: %q\nwant: %q", i, j+1, g, w)
					break
				}
			}
		}
		if bad > 20 {
			t.Fatal("too many differences")
		}
	}
}

func splitKeep(s string) []string {
	var out []string
	for _, l := range bytes.Split([]byte(s), []byte("\n")) {
		out = append(out, string(l))
	}
	return out
}

var snippets = []string{
	"x = 1, 2\nreturn_ = (yield)\n",
	"def f(a, b=1, *args, c, d=2, **kw) -> int:\n    '''doc'''\n    return a if b else -c ** 2\n",
	"async def g():\n    async with a as b, c:\n        await x\n    async for i in y:\n        pass\n",
	"class A(B, metaclass=M):\n    x: int = 3\n    (y): str\n    def m(self, /, q):\n        return f'{self!r:>{q}} {q=}'\n",
	"lambda: 0\nf = lambda x, *y, **z: (x, y)\n",
	"a[1:2, ::3]\nb[...]\nc[:]\nd[x,]\n",
	"print(*a, **k)\n{**a, 'b': 1}\n{1, 2}\nset()\n[i for i in x if i if not i]\n{k: v for k, v in d.items()}\n(x for x in y)\n",
	"try:\n    pass\nexcept (A, B) as e:\n    raise X from e\nelse:\n    pass\nfinally:\n    del a, b\n",
	"if a:\n    pass\nelif b:\n    pass\nelse:\n    x += 1\n",
	"while (n := next(it)) is not None and not x in y:\n    global g\n    break\nelse:\n    continue\n",
	"from . import a as b, c\nfrom ..x.y import *\nimport os.path as p\n",
	"s = 'a' \"b\" '''c\nd'''\nb = b'\\x00\\'' rb'\\d'\nu = u'x'\n",
	"x = 1e16 + 1.0 + 0.1 + 1e-5 + 0x1F + 1_000 + 2j + 1e400\n",
	"assert x, 'msg'\nwith (open(a) as f, open(b) as g):\n    pass\n",
	"x = -(-1) + (~a) ** -b\ny = (a + b) * c - (d - e) - (f - g)\nz = a ** b ** c\nw = (a ** b) ** c\n",
	"f'{x}' f'{{' 'y' f\"{a['k']}\" f'''{b!s}\n'''\n",
	"@dec\n@dec2(1)\ndef f():\n    '''\n    multi \\\\ line\n    '''\n",
	"x = [\n    1,  # one\n    2,\n]\nif x: y = 1; z = 2\n",
	"print('a\\tb\\n', \"it's\", 'say \"hi\"', 'both \\' \"')\n",
	"x = (yield from g)\nasync def f():\n    return [i async for i in a]\n",
	"def f(*, a): pass\ndef g(a, /): pass\ndef h(a, /, b, *, c): pass\n",
	"a = b = c\na.b.c = 1\n(1).real\n1 .real\n",
	"x = not a == b\ny = (not a) == b\nz = a if b else (c if d else e)\nw = (a if b else c) if d else e\n",
	"for x, in y: pass\nfor (a, b) in c: pass\nfor [a, b] in c: pass\n",
	"x = f(a for a in b)\ny = f((a for a in b), c)\n",
	"print(f'{x:{y}.{z}}', f'{3.14:.2f}', f'{x!a}', f'{ {1: 2}[1] }')\n",
	"x = 'é\\u200b\\x7f\\U0001f600'\n",
	"try:\n    pass\nexcept* ValueError:\n    pass\n",
	"x = [*a, *b]\n*a, b = c\n",
	"def f(\n    a,\n    b,\n):\n    pass\n",
	"x = 1 if True else 2\nclass C:\n    pass\n\n\n\nclass D:\n    '''doc'''\n    x = 1\n",
	"print >>sys.stderr, 'x'\n",
	"print 'hello'\n",
	"x = = 1\n",
	"def f(:\n    pass\n",
	"x = (1,)\ny = ()\nz = 1,\n",
	"match x:\n    case [a, *_] | (b, c) if a:\n        pass\n    case {'k': 1, **r} as m:\n        pass\n    case P(1, y=-2 + 3j) | None:\n        pass\n    case a.b | 'x' | _:\n        pass\n",
	"match = 1\nmatch(x)\nmatch[1]\n",
	"match a, *b:\n    case 1, 2:\n        pass\n    case *_,:\n        pass\n    case (a as b) as c:\n        pass\n",
}

func TestUnparseSnippets(t *testing.T) { checkUnparse(t, snippets) }

// TestUnparseSurrogatesAndBools covers what the stdlib corpus found:
// lone surrogates in str literals are kept (and escaped), and an
// attribute of True is spaced like one of an int.
func TestUnparseSurrogatesAndBools(t *testing.T) {
	checkUnparse(t, []string{
		"x = '\\ud800' <= c <= '\\udbff'\ny = f'{a}\\udc80'\n",
		"True.real\n(False).imag\n",
	})
}
