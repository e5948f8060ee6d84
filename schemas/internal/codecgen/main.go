// Command codecgen writes the field-by-field codecs of package schemas'
// records from their struct definitions, so that a field is declared once,
// in its struct with its json tag:
//
//   - jsoncodec_gen.go: the one-pass JSON decoder of Instance (on package
//     jsonscan, with a named constant per field) and the JSON encoder of
//     Sample (SampleEncoder), both held to encoding/json by differential
//     tests and fuzzers;
//   - bincode_gen.go: AppendBincode, ReadBincode and BincodeSize of
//     Instance and Sample, the binary form of package bincode that the
//     mining pipeline's staging files and the train pipeline's parts carry;
//   - fieldlens_gen.go: the lengths of those records' variable-length
//     fields, from which both codecs estimate their buffer sizes.
//
// It reads the struct definitions with go/parser (no type checking, so it
// runs while the generated files are stale or do not compile) and knows
// the field types the records use; a field of any other type stops it with
// an error naming the field. Run it with `go generate ./schemas` (the
// directive is in schemas/doc.go): it reads and writes the current
// directory, or the one -dir names. TestGeneratedFilesAreCurrent fails
// when the committed files differ from what it writes.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// target says which codecs a record gets.
type target struct {
	Type        string
	JSONDecoder bool // readTypeJSON on jsonscan, and fastType
	JSONEncoder bool // (e *TypeEncoder) appendJSON
	// Cached names string fields whose escaped JSON the encoder keeps for
	// the next record (field e.<lowerFirst(name)> of type escaped).
	Cached  []string
	Bincode bool
}

var targets = []target{
	{Type: "Instance", JSONDecoder: true, Bincode: true},
	{Type: "Sample", JSONEncoder: true, Cached: []string{"System", "Prompt"}, Bincode: true},
}

// kind is a field type the generator has codec rules for.
type kind int

const (
	kInt      kind = iota // int
	kInt64                // int64
	kString               // string
	kBool                 // bool
	kFloat64              // float64
	kInts                 // []int
	kInt32s               // []int32
	kFloat32s             // []float32
	kStrings              // []string
	kStrMap               // map[string]string
	kFloatMap             // map[string]float64
	kStruct               // a struct type of the package, not embedded
)

// rule is how the codecs handle one kind. In the formats, %[1]s is the
// field's selector (v.Path).
type rule struct {
	goType string
	// Package bincode: the Append call, the Decoder method, and the
	// encoded size's fixed bytes.
	binAppend, binRead string
	binFixed           int
	// The jsonscan statement that reads the field, setting ok ("": no
	// decoder rule).
	jsonRead string
	// A variable-length kind's total in fieldLens: the struct field, the
	// length of one value (len or bincode.MapLen), and the bytes of one
	// unit of that length in bincode's and in JSON's form, for the size
	// estimates. lenField is "" for fixed-size kinds.
	lenField, lenOf   string
	binUnit, jsonUnit int
}

var rules = map[kind]rule{
	kInt:      {"int", "bincode.AppendInt(b, int64(%[1]s))", "Int", 10, "%[1]s, ok = readJSONInt(p)", "", "", 0, 0},
	kInt64:    {"int64", "bincode.AppendInt(b, %[1]s)", "Int64", 10, "%[1]s, ok = p.Int()", "", "", 0, 0},
	kString:   {"string", "bincode.AppendString(b, %[1]s)", "String", 5, "%[1]s, ok = p.Str()", "strings", "len(%[1]s)", 1, 1},
	kBool:     {"bool", "bincode.AppendBool(b, %[1]s)", "Bool", 1, "", "", "", 0, 0},
	kFloat64:  {"float64", "bincode.AppendFloat(b, %[1]s)", "Float", 8, "%[1]s, ok = p.Float(64)", "", "", 0, 0},
	kInts:     {"[]int", "bincode.AppendInts(b, %[1]s)", "Ints", 5, readJSONInts, "ints", "len(%[1]s)", 10, 12},
	kInt32s:   {"[]int32", "bincode.AppendInt32s(b, %[1]s)", "Int32s", 5, "", "int32s", "len(%[1]s)", 5, 12},
	kFloat32s: {"[]float32", "bincode.AppendFloat32s(b, %[1]s)", "Float32s", 5, "", "float32s", "len(%[1]s)", 4, 12},
	kStrings:  {"[]string", "bincode.AppendStrings(b, %[1]s)", "Strings", 5, "%[1]s, ok = p.StrList()", "stringLists", "len(%[1]s)", 16, 12},
	// A string map is measured in bytes (keys, values and 4 a pair); JSON
	// escapes can double code.
	kStrMap:   {"map[string]string", "bincode.AppendStringMap(b, %[1]s)", "StringMap", 5, "%[1]s, ok = p.StrMap()", "stringMaps", "bincode.MapLen(%[1]s)", 1, 2},
	kFloatMap: {"map[string]float64", "bincode.AppendFloatMap(b, %[1]s)", "FloatMap", 5, "", "floatMaps", "len(%[1]s)", 24, 64},
}

// readJSONInts reads a list of ints; an empty list is not nil, as with
// encoding/json.
const readJSONInts = `%[1]s = []int{}
ok = p.Array(func() bool {
	n, ok := readJSONInt(p)
	%[1]s = append(%[1]s, n)
	return ok
})`

// kindOf maps a Go type, as written in the source, to its kind.
var kindOf = func() map[string]kind {
	m := map[string]kind{}
	for k, r := range rules {
		m[r.goType] = k
	}
	return m
}()

// field is one JSON-visible field of a record: embedded structs are
// flattened, as encoding/json flattens them.
type field struct {
	Path      string // selector from the record, e.g. "Stats.Hunks" or "Rollout.ID"
	Name      string // the Go field name
	JSON      string // the name in the JSON form
	OmitEmpty bool
	Kind      kind
	Struct    *record // for kStruct
}

type record struct {
	Name   string
	Fields []field
}

// pkg is the struct types declared in a package's source.
type pkg struct {
	structs map[string]*ast.StructType
	records map[string]*record
}

func main() {
	dir := flag.String("dir", ".", "the schemas package directory to read and write")
	flag.Parse()
	files, err := generate(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "codecgen:", err)
		os.Exit(1)
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(*dir, name), src, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "codecgen:", err)
			os.Exit(1)
		}
	}
}

// generate returns the generated files for the package in dir, by name.
func generate(dir string) (map[string][]byte, error) {
	p, err := parseDir(dir)
	if err != nil {
		return nil, err
	}
	var js, bin, size gen
	js.imports = []string{"fmt", "slices", "strconv", "swerl/internal/jsonscan"}
	bin.imports = []string{"swerl/internal/bincode"}
	size.imports = []string{"swerl/internal/bincode"}
	size.fieldLensType()
	for _, t := range targets {
		r, err := p.record(t.Type)
		if err != nil {
			return nil, err
		}
		if t.JSONEncoder || t.Bincode {
			if err := size.fieldLens(r); err != nil {
				return nil, err
			}
		}
		if t.JSONDecoder {
			if err := js.jsonDecoder(r, map[string]bool{}); err != nil {
				return nil, err
			}
		}
		if t.JSONEncoder {
			if err := js.jsonEncoder(r, t.Cached); err != nil {
				return nil, err
			}
		}
		if t.Bincode {
			if err := bin.bincode(r); err != nil {
				return nil, err
			}
		}
	}
	out := map[string][]byte{}
	for name, g := range map[string]*gen{"jsoncodec_gen.go": &js, "bincode_gen.go": &bin, "fieldlens_gen.go": &size} {
		src, err := g.source()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = src
	}
	return out, nil
}

func parseDir(dir string) (*pkg, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	p := &pkg{structs: map[string]*ast.StructType{}, records: map[string]*record{}}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, "_gen.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				if st, ok := ts.Type.(*ast.StructType); ok {
					p.structs[ts.Name.Name] = st
				}
			}
		}
	}
	if len(p.structs) == 0 {
		return nil, fmt.Errorf("no struct types in %s", dir)
	}
	return p, nil
}

// record resolves the JSON-visible fields of struct type name.
func (p *pkg) record(name string) (*record, error) {
	if r, ok := p.records[name]; ok {
		return r, nil
	}
	st, ok := p.structs[name]
	if !ok {
		return nil, fmt.Errorf("no struct type %s", name)
	}
	r := &record{Name: name}
	if err := p.fields(r, st, ""); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	seen := map[string]string{}
	for _, f := range r.Fields {
		if prev, dup := seen[f.JSON]; dup {
			// encoding/json would let the shallower one win; the codecs
			// do not model that, so refuse it.
			return nil, fmt.Errorf("%s: %s and %s share the JSON name %q", name, prev, f.Path, f.JSON)
		}
		seen[f.JSON] = f.Path
	}
	p.records[name] = r
	return r, nil
}

func (p *pkg) fields(r *record, st *ast.StructType, prefix string) error {
	for _, af := range st.Fields.List {
		typ := exprString(af.Type)
		if len(af.Names) == 0 { // embedded: flattened
			sub, ok := p.structs[typ]
			if !ok {
				return fmt.Errorf("embedded %s is not a struct type of the package", typ)
			}
			if err := p.fields(r, sub, prefix+typ+"."); err != nil {
				return err
			}
			continue
		}
		var tag reflect.StructTag
		if af.Tag != nil {
			s, err := strconv.Unquote(af.Tag.Value)
			if err != nil {
				return err
			}
			tag = reflect.StructTag(s)
		}
		for _, n := range af.Names {
			if !n.IsExported() {
				continue
			}
			js, ok := tag.Lookup("json")
			if !ok {
				return fmt.Errorf("field %s%s has no json tag", prefix, n.Name)
			}
			jname, opts, _ := strings.Cut(js, ",")
			if jname == "-" || jname == "" {
				return fmt.Errorf("field %s%s: json tag %q: the codecs need a name", prefix, n.Name, js)
			}
			f := field{Path: prefix + n.Name, Name: n.Name, JSON: jname, OmitEmpty: opts == "omitempty"}
			if k, ok := kindOf[typ]; ok {
				f.Kind = k
			} else if _, ok := p.structs[typ]; ok {
				sub, err := p.record(typ)
				if err != nil {
					return err
				}
				f.Kind, f.Struct = kStruct, sub
			} else {
				return fmt.Errorf("field %s%s: no codec rule for type %s: teach schemas/internal/codecgen", prefix, n.Name, typ)
			}
			r.Fields = append(r.Fields, f)
		}
	}
	return nil
}

func exprString(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.ArrayType:
		if t.Len == nil {
			return "[]" + exprString(t.Elt)
		}
	case *ast.MapType:
		return "map[" + exprString(t.Key) + "]" + exprString(t.Value)
	case *ast.StarExpr:
		return "*" + exprString(t.X)
	case *ast.SelectorExpr:
		return exprString(t.X) + "." + t.Sel.Name
	}
	return fmt.Sprintf("%T", e)
}

// gen accumulates one generated file.
type gen struct {
	imports []string
	body    bytes.Buffer
}

func (g *gen) p(format string, args ...any) {
	fmt.Fprintf(&g.body, format, args...)
	g.body.WriteByte('\n')
}

func (g *gen) source() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("// Code generated by schemas/internal/codecgen from the struct definitions; DO NOT EDIT.\n\n")
	b.WriteString("package schemas\n\nimport (\n")
	// The standard library's packages, then the module's (no dot in the
	// first element of the former, as goimports groups them).
	sort.Slice(g.imports, func(i, j int) bool {
		si, sj := strings.Contains(g.imports[i], "/"), strings.Contains(g.imports[j], "/")
		if si != sj {
			return sj
		}
		return g.imports[i] < g.imports[j]
	})
	for i, im := range g.imports {
		if i > 0 && strings.Contains(im, "/") && !strings.Contains(g.imports[i-1], "/") {
			b.WriteByte('\n')
		}
		if bytes.Contains(g.body.Bytes(), []byte(im[strings.LastIndexByte(im, '/')+1:]+".")) {
			fmt.Fprintf(&b, "\t%q\n", im)
		}
	}
	b.WriteString(")\n\n")
	b.Write(g.body.Bytes())
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, b.Bytes())
	}
	return src, nil
}

func lowerFirst(s string) string { return strings.ToLower(s[:1]) + s[1:] }

// constName is the named index of f in r's JSON field list.
func constName(r *record, f field) string { return lowerFirst(r.Name) + "Field" + f.Name }

// jsonDecoder writes r's field names, their index constants and
// readRJSON (for nested structs too), and for a top-level record fastR.
func (g *gen) jsonDecoder(r *record, done map[string]bool) error {
	top := len(done) == 0
	done[r.Name] = true
	lower := lowerFirst(r.Name)
	g.p("// %sJSONNames are %s's JSON names, indexed by the %sField constants.", lower, r.Name, lower)
	g.p("var %sJSONNames = [...]string{", lower)
	for _, f := range r.Fields {
		g.p("%q,", f.JSON)
	}
	g.p("}\n")
	g.p("// Indexes of %s's fields in %sJSONNames.", r.Name, lower)
	g.p("const (")
	for i, f := range r.Fields {
		if i == 0 {
			g.p("%s = iota", constName(r, f))
		} else {
			g.p("%s", constName(r, f))
		}
	}
	g.p(")\n")
	if top {
		g.p("// fast%s decodes the common shape of %s's JSON in one pass: every", r.Name, r.Name)
		g.p("// known field with its plain type or null, other fields any JSON. It gives")
		g.p("// up (ok false) on anything else (see jsonscan.Scanner.Fields); where it")
		g.p("// says ok, v is what json.Unmarshal gives into start (Fuzz tests hold it).")
		g.p("func fast%s(b []byte, start %s) (v %s, ok bool) {", r.Name, r.Name, r.Name)
		g.p("v = start")
		g.p("ok = jsonscan.Try(b, func(p *jsonscan.Scanner) bool { return read%sJSON(p, &v) })", r.Name)
		g.p("return v, ok")
		g.p("}\n")
	}
	g.p("// read%sJSON reads a JSON object into v's fields.", r.Name)
	g.p("func read%sJSON(p *jsonscan.Scanner, v *%s) bool {", r.Name, r.Name)
	g.p("return p.Fields(%sJSONNames[:], func(f int) bool {", lower)
	g.p("var ok bool")
	g.p("switch f {")
	var nested []*record
	for _, f := range r.Fields {
		g.p("case %s:", constName(r, f))
		x := "v." + f.Path
		switch rl := rules[f.Kind]; {
		case f.Kind == kStruct:
			g.p("ok = read%sJSON(p, &%s)", f.Struct.Name, x)
			if !done[f.Struct.Name] {
				nested = append(nested, f.Struct)
			}
		case rl.jsonRead != "":
			g.p(rl.jsonRead, x)
		default:
			return fmt.Errorf("%s.%s: no JSON decoding rule for its type: teach codecgen and jsonscan", r.Name, f.Path)
		}
	}
	g.p("}")
	g.p("return ok")
	g.p("})")
	g.p("}\n")
	for _, n := range nested {
		if err := g.jsonDecoder(n, done); err != nil {
			return err
		}
	}
	return nil
}

// jsonEncoder writes (e *REncoder) appendJSON: r's JSON, byte for byte
// what encoding/json's Marshal writes. The first field must not be
// omitempty (the commas are fixed).
func (g *gen) jsonEncoder(r *record, cached []string) error {
	if len(r.Fields) == 0 || r.Fields[0].OmitEmpty {
		return fmt.Errorf("%s: the encoder needs a first field without omitempty", r.Name)
	}
	isCached := map[string]bool{}
	for _, c := range cached {
		isCached[c] = true
	}
	id := ""
	for _, f := range r.Fields {
		if f.JSON == "id" && f.Kind == kString {
			id = "v." + f.Path
		}
	}
	if id == "" {
		return fmt.Errorf("%s: the encoder's errors name the record by its id field, and it has none", r.Name)
	}
	lower := lowerFirst(r.Name)
	fail := func(what string, args ...string) {
		g.p("return dst, fmt.Errorf(\"schemas: %s %%s: %s: %%w\", %s, err)", lower, what, strings.Join(append([]string{id}, args...), ", "))
	}
	g.p("// appendJSON appends v's JSON to dst, as json.Marshal writes it; it fails,")
	g.p("// naming the record and the field, on a NaN or infinite number.")
	g.p("func (e *%sEncoder) appendJSON(dst []byte, v *%s) ([]byte, error) {", r.Name, r.Name)
	g.p("b := slices.Grow(dst, 512+v.fieldLens().jsonSize())")
	for _, f := range r.Fields {
		if f.Kind == kFloat64 || f.Kind == kFloat32s || f.Kind == kFloatMap {
			g.p("var err error")
			break
		}
	}
	for i, f := range r.Fields {
		x := "v." + f.Path
		sep := ","
		if i == 0 {
			sep = "{"
		}
		cond := ""
		if f.OmitEmpty {
			switch f.Kind {
			case kString:
				cond = x + ` != ""`
			case kInt, kInt64, kFloat64:
				cond = x + " != 0"
			case kBool:
				cond = x
			default:
				cond = "len(" + x + ") > 0"
			}
			g.p("if %s {", cond)
		}
		nullable := !f.OmitEmpty && f.Kind >= kInts && f.Kind <= kFloatMap
		g.p("b = append(b, `%s%q:`...)", sep, f.JSON)
		if nullable {
			g.p("if %s == nil {", x)
			g.p(`b = append(b, "null"...)`)
			g.p("} else {")
		}
		switch f.Kind {
		case kInt:
			g.p("b = strconv.AppendInt(b, int64(%s), 10)", x)
		case kInt64:
			g.p("b = strconv.AppendInt(b, %s, 10)", x)
		case kBool:
			g.p("b = strconv.AppendBool(b, %s)", x)
		case kString:
			if isCached[f.Name] {
				g.p("b = append(b, e.%s.of(%s)...)", lowerFirst(f.Name), x)
			} else {
				g.p("b = appendJSONString(b, %s)", x)
			}
		case kFloat64:
			g.p("if b, err = appendJSONFloat(b, %s, 64); err != nil {", x)
			fail(f.JSON)
			g.p("}")
		case kInts, kInt32s:
			g.p("b = appendJSONInts(b, %s)", x)
		case kStrings:
			g.p("b = append(b, '[')")
			g.p("for i, s := range %s {", x)
			g.p("if i > 0 { b = append(b, ',') }")
			g.p("b = appendJSONString(b, s)")
			g.p("}")
			g.p("b = append(b, ']')")
		case kFloat32s:
			g.p("b = append(b, '[')")
			g.p("for i, f := range %s {", x)
			g.p("if i > 0 { b = append(b, ',') }")
			g.p("if b, err = appendJSONFloat(b, float64(f), 32); err != nil {")
			fail(f.JSON+"[%d]", "i")
			g.p("}")
			g.p("}")
			g.p("b = append(b, ']')")
		case kStrMap, kFloatMap:
			g.p("b = append(b, '{')")
			g.p("for i, k := range SortedPaths(%s) {", x)
			g.p("if i > 0 { b = append(b, ',') }")
			g.p("b = appendJSONString(b, k)")
			g.p("b = append(b, ':')")
			if f.Kind == kStrMap {
				g.p("b = appendJSONString(b, %s[k])", x)
			} else {
				g.p("if b, err = appendJSONFloat(b, %s[k], 64); err != nil {", x)
				fail(f.JSON+"[%q]", "k")
				g.p("}")
			}
			g.p("}")
			g.p("b = append(b, '}')")
		default:
			return fmt.Errorf("%s.%s: no JSON encoding rule for its type: teach codecgen", r.Name, f.Path)
		}
		if nullable {
			g.p("}")
		}
		if f.OmitEmpty {
			g.p("}")
		}
	}
	g.p("return append(b, '}'), nil")
	g.p("}\n")
	return nil
}

// flat is r's fields with nested structs flattened, their paths from r:
// the fields the binary form writes in place and the size estimates sum.
func flat(r *record) []field {
	var all []field
	var flatten func(fs []field, prefix string)
	flatten = func(fs []field, prefix string) {
		for _, f := range fs {
			if f.Kind == kStruct {
				flatten(f.Struct.Fields, prefix+f.Path+".")
				continue
			}
			f.Path = prefix + f.Path
			all = append(all, f)
		}
	}
	flatten(r.Fields, "")
	return all
}

// lenKinds are the variable-length kinds, in fieldLens' field order.
func lenKinds() []kind {
	var ks []kind
	for k := kInt; k < kStruct; k++ {
		if rules[k].lenField != "" {
			ks = append(ks, k)
		}
	}
	return ks
}

// fieldLensType writes type fieldLens, one total a variable-length kind,
// and its bincodeSize and jsonSize, which weigh the totals by the kinds'
// units: the one place the codecs' size estimates are made.
func (g *gen) fieldLensType() {
	g.p("// fieldLens are the lengths of a record's variable-length fields, summed")
	g.p("// by kind, for the codecs' size estimates.")
	g.p("type fieldLens struct {")
	for _, k := range lenKinds() {
		g.p("%s int // %s", rules[k].lenField, rules[k].goType)
	}
	g.p("}\n")
	for _, c := range []struct {
		name, form string
		unit       func(rule) int
	}{
		{"bincodeSize", "package bincode's form", func(r rule) int { return r.binUnit }},
		{"jsonSize", "JSON", func(r rule) int { return r.jsonUnit }},
	} {
		var terms []string
		for _, k := range lenKinds() {
			rl := rules[k]
			if u := c.unit(rl); u == 1 {
				terms = append(terms, "l."+rl.lenField)
			} else {
				terms = append(terms, fmt.Sprintf("%d*l.%s", u, rl.lenField))
			}
		}
		g.p("// %s estimates the bytes the variable-length fields take in %s.", c.name, c.form)
		g.p("func (l fieldLens) %s() int {", c.name)
		g.p("return %s", strings.Join(terms, " + "))
		g.p("}\n")
	}
}

// fieldLens writes r's fieldLens method.
func (g *gen) fieldLens(r *record) error {
	byField := map[string][]string{}
	for _, f := range flat(r) {
		rl, ok := rules[f.Kind]
		if !ok {
			return fmt.Errorf("%s.%s: no codec rule for its type: teach codecgen", r.Name, f.Path)
		}
		if rl.lenField != "" {
			byField[rl.lenField] = append(byField[rl.lenField], fmt.Sprintf(rl.lenOf, "v."+f.Path))
		}
	}
	g.p("// fieldLens sums the lengths of v's variable-length fields by kind.")
	g.p("func (v *%s) fieldLens() fieldLens {", r.Name)
	g.p("return fieldLens{")
	for _, k := range lenKinds() {
		if xs := byField[rules[k].lenField]; len(xs) > 0 {
			g.p("%s: %s,", rules[k].lenField, strings.Join(xs, " +\n"))
		}
	}
	g.p("}")
	g.p("}\n")
	return nil
}

// bincode writes r's AppendBincode, ReadBincode and BincodeSize.
func (g *gen) bincode(r *record) error {
	all := flat(r) // nested structs flattened: they are written in place
	for _, f := range all {
		if _, ok := rules[f.Kind]; !ok {
			return fmt.Errorf("%s.%s: no bincode rule for its type: teach codecgen and bincode", r.Name, f.Path)
		}
	}
	g.p("// AppendBincode appends v in package bincode's binary form, every field in")
	g.p("// declaration order, and returns the extended buffer. Maps are written in")
	g.p("// map order: equal records may encode to different bytes.")
	g.p("func (v *%s) AppendBincode(b []byte) []byte {", r.Name)
	for _, f := range all {
		g.p("b = "+rules[f.Kind].binAppend, "v."+f.Path)
	}
	g.p("return b")
	g.p("}\n")
	g.p("// ReadBincode reads what AppendBincode wrote into v's fields; a damaged")
	g.p("// input is d's error (d.Err), never a panic.")
	g.p("func (v *%s) ReadBincode(d *bincode.Decoder) {", r.Name)
	for _, f := range all {
		g.p("v.%s = d.%s()", f.Path, rules[f.Kind].binRead)
	}
	g.p("}\n")
	fixed := 0
	for _, f := range all {
		fixed += rules[f.Kind].binFixed
	}
	g.p("// BincodeSize estimates the length of v's AppendBincode, to size a buffer.")
	g.p("func (v *%s) BincodeSize() int {", r.Name)
	g.p("return %d + v.fieldLens().bincodeSize()", fixed)
	g.p("}\n")
	return nil
}
