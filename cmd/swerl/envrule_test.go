package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// envReaders are the functions that read one environment variable by name.
var envReaders = map[string]map[string]bool{
	"os":      {"Getenv": true, "LookupEnv": true},
	"syscall": {"Getenv": true},
}

// envExempt are the module folders allowed to read a variable by a fixed
// name: the command, which turns the environment into configuration; the
// test helpers; and internal/gcpace, which honours Go's own GOGC and
// GOMEMLIMIT where it tunes the collector.
var envExempt = []string{"cmd", "internal/testenv", "internal/gcpace"}

// fixedNameEnvReads returns, as "file:line: call", the reads in src of an
// environment variable whose name is fixed in the code: a string literal
// (or literals joined with +), a constant of the file's package, or an
// identifier of another package (pkg.Name). A name held in a variable, a
// parameter or a field (kafkaio's PasswordEnv, engineapi.APIKey's names)
// is configuration and passes.
func fixedNameEnvReads(fset *token.FileSet, f *ast.File, consts map[string]bool) []string {
	imports := map[string]string{} // local name → import path
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		name := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = path
	}
	var fixed func(e ast.Expr) bool
	fixed = func(e ast.Expr) bool {
		switch e := e.(type) {
		case *ast.BasicLit:
			return e.Kind == token.STRING
		case *ast.ParenExpr:
			return fixed(e.X)
		case *ast.BinaryExpr:
			return e.Op == token.ADD && fixed(e.X) && fixed(e.Y)
		case *ast.Ident:
			return consts[e.Name]
		case *ast.SelectorExpr:
			x, ok := e.X.(*ast.Ident)
			return ok && imports[x.Name] != "" && x.Obj == nil
		}
		return false
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok || !envReaders[imports[pkg.Name]][sel.Sel.Name] || pkg.Obj != nil {
			return true
		}
		if fixed(call.Args[0]) {
			arg := "…"
			if lit, ok := call.Args[0].(*ast.BasicLit); ok {
				arg = lit.Value
			} else if id, ok := call.Args[0].(*ast.Ident); ok {
				arg = id.Name
			} else if s, ok := call.Args[0].(*ast.SelectorExpr); ok {
				arg = s.X.(*ast.Ident).Name + "." + s.Sel.Name
			}
			out = append(out, fmt.Sprintf("%s: %s.%s(%s)", fset.Position(call.Pos()), pkg.Name, sel.Sel.Name, arg))
		}
		return true
	})
	return out
}

// packageConsts returns the names of the package-level constants declared
// in files.
func packageConsts(files []*ast.File) map[string]bool {
	consts := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					consts[n.Name] = true
				}
			}
		}
	}
	return consts
}

// Libraries take configuration, not the environment: outside cmd/ (and
// the exempt folders), no non-test file reads a variable by a name fixed
// in the code. A secret a worker reads on its own machine is read by a
// name its configuration carries.
func TestLibrariesReadNoEnvironmentVariableByName(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	dirs := map[string][]string{} // folder → its non-test .go files
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			for _, ex := range envExempt {
				if rel == ex {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			dirs[filepath.Dir(p)] = append(dirs[filepath.Dir(p)], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 20 {
		t.Fatalf("found Go files in only %d folders under %s: the walk is wrong", len(dirs), root)
	}
	fset := token.NewFileSet()
	var bad []string
	for _, paths := range dirs {
		var files []*ast.File
		for _, p := range paths {
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		consts := packageConsts(files)
		for _, f := range files {
			bad = append(bad, fixedNameEnvReads(fset, f, consts)...)
		}
	}
	for _, b := range bad {
		t.Errorf("%s: a library reads the environment by a fixed name; read it in cmd/ and pass it down as configuration (a worker-side secret: by a variable name the config carries)", strings.TrimPrefix(b, root+string(filepath.Separator)))
	}
}

// The check finds what it is meant to find, and passes names held in
// variables.
func TestFixedNameEnvReadsFindsThem(t *testing.T) {
	src := `package p

import (
	"os"
	sys "syscall"

	"example.com/names"
)

const key = "K"

type cfg struct{ PasswordEnv string }

func f(c cfg, names2 []string) {
	os.Getenv("HOME")
	os.LookupEnv(key)
	os.Getenv("SWERL_" + "X")
	sys.Getenv(names.Var)
	os.Getenv(c.PasswordEnv)
	for _, n := range names2 {
		os.Getenv(n)
	}
	os.Environ()
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := fixedNameEnvReads(fset, f, packageConsts([]*ast.File{f}))
	want := []string{`p.go:15:2: os.Getenv("HOME")`, `p.go:16:2: os.LookupEnv(key)`, `p.go:17:2: os.Getenv(…)`, `p.go:18:2: sys.Getenv(names.Var)`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
