package parquetio

import (
	"errors"
	"io"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// ScanAny reads the file at path without knowing its row type: each row is
// reconstructed from the file's own schema into a map from column name to
// value (nested groups become maps, lists slices, MAP columns maps). It is
// how `swerl cat` prints any file swerl writes.
//
// A file holding most of the columns of one of swerl's records (Sample,
// Rollout, Instance, WeightVersion, DeadLetter) has its columns checked
// as Scan checks them for that record: one missing or of the wrong type
// is an error naming the file and the column. Other files are read as
// they are.
//
// It is as safe on any bytes as Scan.
func ScanAny(path string, fn func(row map[string]any) error) error {
	f, err := openFile(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return scanAnyFile(path, f.pf, fn)
}

// scanAnyFile reads the rows of an opened file as maps.
func scanAnyFile(path string, pf *parquet.File, fn func(row map[string]any) error) error {
	schema := pf.Schema()
	// A file of one of swerl's records is checked as a typed read checks
	// it: a damaged column name is an error here too, not a field missing
	// from every row printed.
	var rt rowType
	var isRecord bool
	if err := guard(path, "check the schema", func() error {
		rt, isRecord = recordOf(schema)
		return nil
	}); err != nil {
		return err
	}
	if isRecord {
		if err := checkColumns(path, rt, schema); err != nil {
			return err
		}
	}
	var r *parquet.Reader
	if err := guard(path, "read", func() error {
		r = parquet.NewReader(pf, schema)
		return nil
	}); err != nil {
		return err
	}
	rows := make([]parquet.Row, 64)
	for {
		var n int
		err := guard(path, "read", func() error {
			var err error
			n, err = r.ReadRows(rows)
			return err
		})
		if errors.Is(err, ErrCorrupt) {
			return err
		}
		for _, row := range rows[:n] {
			var v any
			if rerr := guard(path, "reconstruct row", func() error { return schema.Reconstruct(&v, row) }); rerr != nil {
				return rerr
			}
			v = textify(schema, v)
			m, ok := v.(map[string]any)
			if !ok {
				return corrupt(path, "row is %T, not a group", v)
			}
			if ferr := fn(m); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			guard(path, "close", r.Close)
			return nil
		}
		if err != nil {
			return corrupt(path, "%v", err)
		}
	}
}

// textify turns the []byte values that reconstruction leaves in MAP and LIST
// elements back into strings where the column's logical type is STRING, so
// JSON output shows text rather than base64.
func textify(n parquet.Node, v any) any {
	if n.Leaf() {
		if b, ok := v.([]byte); ok {
			if isLogical[*format.StringType](n) {
				return string(b)
			}
		}
		return v
	}
	switch x := v.(type) {
	case map[string]any:
		if isLogical[*format.MapType](n) {
			valueNode := mapValueNode(n)
			for k, e := range x {
				if valueNode != nil {
					x[k] = textify(valueNode, e)
				}
			}
			return x
		}
		for _, f := range n.Fields() {
			if e, ok := x[f.Name()]; ok {
				x[f.Name()] = textify(f, e)
			}
		}
		return x
	case []any:
		elem := listElemNode(n)
		if elem != nil {
			for i, e := range x {
				x[i] = textify(elem, e)
			}
		}
		return x
	}
	return v
}

// mapValueNode returns the value node of a MAP group (MAP → key_value → value).
func mapValueNode(n parquet.Node) parquet.Node {
	for _, kv := range n.Fields() {
		for _, f := range kv.Fields() {
			if f.Name() == "value" {
				return f
			}
		}
	}
	return nil
}

// listElemNode returns the element node of a LIST group (LIST → list → element).
func listElemNode(n parquet.Node) parquet.Node {
	if isLogical[*format.ListType](n) {
		for _, l := range n.Fields() {
			if fs := l.Fields(); len(fs) == 1 {
				return fs[0]
			}
		}
	}
	if n.Repeated() && n.Leaf() {
		return n
	}
	return nil
}

func isLogical[T any](n parquet.Node) bool {
	lt := n.Type().LogicalType()
	if lt == nil {
		return false
	}
	_, ok := lt.Value.(T)
	return ok
}
