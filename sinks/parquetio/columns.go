package parquetio

import (
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/parquet-go/parquet-go"

	"swerl/schemas"
)

// A damaged footer can rename a column (bytes flipped in "advantage" made
// it "advanta>e") and the file still decodes: a reader that let columns
// of the row type be absent then read every row without that field, and
// swerl learn trained on advantages of zero. So the columns of a file are
// checked against the row type before any row is read:
//
//   - every column of the row type must be in the file, unless it is
//     optional: under a field tagged parquet:",optional" or listed by the
//     row type's OptionalColumns (fields added to a record after files
//     were written without them);
//   - a column in both must have a physical type of the same class
//     (parquet-go converts within one: INT32 and INT64, FLOAT and DOUBLE,
//     BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY) and the same repetition depth;
//   - a column of the file the row type lacks is reported as a warning,
//     unless the row type is a Projection.
//
// The errors wrap ErrCorrupt and name the file and the column.

// Optional is implemented by a row type whose files may lack some of its
// columns: OptionalColumns lists them by name (a top-level name covers
// the columns under it); they read as zero.
type Optional interface{ OptionalColumns() []string }

// Projection is implemented by a row type that reads a few of the columns
// of files that hold more (a report's rows): the file's other columns are
// expected, not reported.
type Projection interface{ ParquetProjection() }

// warnings receives the unknown-column warnings; nil: slog.Default().
var warnings atomic.Pointer[slog.Logger]

// SetWarnings sends the warnings of the readers (a file's columns that
// its row type lacks) to log; nil restores slog.Default().
func SetWarnings(log *slog.Logger) { warnings.Store(log) }

func warn(msg string, args ...any) {
	log := warnings.Load()
	if log == nil {
		log = slog.Default()
	}
	log.Warn(msg, args...)
}

// rowType is what the column check needs of a row type.
type rowType struct {
	name       string // for errors: "schemas.Sample"
	schema     *parquet.Schema
	optional   []string // OptionalColumns
	projection bool
}

func rowTypeOf[T any]() rowType {
	var zero T
	rt := rowType{name: reflect.TypeFor[T]().String(), schema: parquet.SchemaOf(new(T))}
	for _, v := range []any{zero, &zero} {
		if o, ok := v.(Optional); ok {
			rt.optional = o.OptionalColumns()
		}
		if _, ok := v.(Projection); ok {
			rt.projection = true
		}
	}
	return rt
}

// isOptional reports whether column path p of the row type may be absent.
func (rt rowType) isOptional(p []string) bool {
	if slices.Contains(rt.optional, p[0]) {
		return true
	}
	var n parquet.Node = rt.schema
	for _, name := range p {
		i := slices.IndexFunc(n.Fields(), func(f parquet.Field) bool { return f.Name() == name })
		if i < 0 {
			return false
		}
		n = n.Fields()[i]
		if n.Optional() {
			return true
		}
	}
	return false
}

// checkRowType checks the file's schema against the row type T (see
// above). A damaged footer can give a leaf a type parquet-go's own methods
// panic on (Kind of a MAP), so the comparison runs under guard.
func checkRowType[T any](path string, fs *parquet.Schema) error {
	return checkColumns(path, rowTypeOf[T](), fs)
}

func checkColumns(path string, rt rowType, fs *parquet.Schema) error {
	var err error
	if gerr := guard(path, "check the schema", func() error {
		err = compareColumns(path, rt, fs)
		return nil
	}); gerr != nil {
		return gerr
	}
	return err
}

func compareColumns(path string, rt rowType, fs *parquet.Schema) error {
	want := rt.schema
	var missing []string
	matched := 0
	for _, p := range want.Columns() {
		wl, _ := want.Lookup(p...)
		fl, ok := fs.Lookup(p...)
		if !ok {
			if !rt.isOptional(p) {
				missing = append(missing, strings.Join(p, "."))
			}
			continue
		}
		matched++
		wk, fk := wl.Node.Type().Kind(), fl.Node.Type().Kind()
		if kindClass(wk) != kindClass(fk) || wl.MaxRepetitionLevel != fl.MaxRepetitionLevel {
			return corrupt(path, "column %s is %s (repetition depth %d), a %s row needs %s (depth %d)",
				strings.Join(p, "."), fk, fl.MaxRepetitionLevel, rt.name, wk, wl.MaxRepetitionLevel)
		}
	}
	if matched == 0 && len(want.Columns()) > 0 {
		return corrupt(path, "none of the columns of a %s row (e.g. %s) is in the file", rt.name, strings.Join(want.Columns()[0], "."))
	}
	unknown := unknownColumns(rt, fs)
	if len(missing) > 0 {
		msg := fmt.Sprintf("column %s of a %s row is missing", missing[0], rt.name)
		if len(missing) > 1 {
			msg = fmt.Sprintf("columns %s of a %s row are missing", strings.Join(missing, ", "), rt.name)
		}
		if len(unknown) > 0 {
			msg += fmt.Sprintf(" (the file has unknown columns: %s)", strings.Join(unknown, ", "))
		}
		return corrupt(path, "%s", msg)
	}
	if len(unknown) > 0 && !rt.projection {
		warn("parquetio: the file has columns its row type lacks; they are not read", "file", path, "row", rt.name, "columns", strings.Join(unknown, ", "))
	}
	return nil
}

// unknownColumns lists the columns of fs that the row type lacks.
func unknownColumns(rt rowType, fs *parquet.Schema) []string {
	var out []string
	for _, p := range fs.Columns() {
		if _, ok := rt.schema.Lookup(p...); !ok {
			out = append(out, strings.Join(p, "."))
		}
	}
	return out
}

// kindClass groups the physical types parquet-go converts between.
func kindClass(k parquet.Kind) string {
	switch k {
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return "bytes"
	case parquet.Boolean:
		return "boolean"
	case parquet.Float, parquet.Double:
		return "float"
	}
	return "integer"
}

// records are the row types of the files swerl writes. ScanAny, which
// has no row type, checks a file against the one whose columns it holds
// most of (see recordOf).
var records = []rowType{
	rowTypeOf[schemas.Sample](),
	rowTypeOf[schemas.Rollout](),
	rowTypeOf[schemas.Instance](),
	rowTypeOf[schemas.WeightVersion](),
	rowTypeOf[schemas.DeadLetter](),
}

// recordOf returns the record type a file of schema fs holds: of the
// records with more than half their columns in the file, the one with the
// most columns present less columns missing. ok is false for a file of
// no record (another tool's, or a reward input), read as it is.
func recordOf(fs *parquet.Schema) (rt rowType, ok bool) {
	best := 0
	for _, r := range records {
		cols := r.schema.Columns()
		have := 0
		for _, p := range cols {
			if _, found := fs.Lookup(p...); found {
				have++
			}
		}
		if score := 2*have - len(cols); 2*have > len(cols) && (!ok || score > best) {
			rt, best, ok = r, score, true
		}
	}
	return rt, ok
}
