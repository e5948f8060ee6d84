package parquetio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/parquet-go/parquet-go/encoding/thrift"
)

// Thrift compact-protocol checks. parquet-go decodes a footer or a page
// header by trusting its lengths: a list that declares 2^31 elements is
// allocated (reflect.MakeSlice) before a single element is read, and a
// binary field of a page header is allocated at its declared length before
// it is read. A few damaged bytes thus end the process with "fatal error:
// out of memory", which no recover catches. checkThrift walks the encoded
// bytes first, without allocating, against the Go type parquet-go will
// decode into: it requires every list, map and binary to fit in the bytes
// that are there, limits nesting, and adds up what the decoder will
// allocate for lists (elements times the Go size of the element), so a
// caller can refuse bytes that would cost more than a budget.

// Compact protocol wire types.
const (
	ctStop   = 0
	ctTrue   = 1
	ctFalse  = 2
	ctByte   = 3
	ctI16    = 4
	ctI32    = 5
	ctI64    = 6
	ctDouble = 7
	ctBinary = 8
	ctList   = 9
	ctSet    = 10
	ctMap    = 11
	ctStruct = 12
	ctUUID   = 13
)

// maxThriftDepth bounds nesting: parquet-go's decoder recurses once a
// level, and a deep enough nest would overflow the goroutine stack, which
// is fatal too. The Parquet format nests a handful of levels.
const maxThriftDepth = 64

// errThriftShort means the bytes end inside the value: a caller reading a
// page header from a window may retry with a larger one.
var errThriftShort = errors.New("thrift: truncated")

// thriftWalker walks one compact-protocol value.
type thriftWalker struct {
	b     []byte
	off   int
	alloc int64 // bytes the decoder would allocate for lists, maps and (copying) binaries
	// copyBinary counts binary fields as allocations: parquet-go's stream
	// decoder (page headers) copies them, its bytes decoder (footers)
	// slices its input.
	copyBinary bool
}

// checkThrift walks one struct encoded at the start of b that parquet-go
// would decode into Go type t, and returns the bytes it takes and what
// decoding it would allocate.
func checkThrift(b []byte, t reflect.Type, copyBinary bool) (n int, alloc int64, err error) {
	w := &thriftWalker{b: b, copyBinary: copyBinary}
	if err := w.value(ctStruct, t, 0, false); err != nil {
		return w.off, w.alloc, err
	}
	return w.off, w.alloc, nil
}

func (w *thriftWalker) byte1() (byte, error) {
	if w.off >= len(w.b) {
		return 0, errThriftShort
	}
	c := w.b[w.off]
	w.off++
	return c, nil
}

func (w *thriftWalker) uvarint() (uint64, error) {
	v, n := binary.Uvarint(w.b[w.off:])
	if n == 0 {
		return 0, errThriftShort
	}
	if n < 0 {
		return 0, errors.New("thrift: varint overflows 64 bits")
	}
	w.off += n
	return v, nil
}

func (w *thriftWalker) skip(n uint64) error {
	if n > uint64(len(w.b)-w.off) {
		return errThriftShort
	}
	w.off += int(n)
	return nil
}

// value walks a value of wire type ct; t is the Go type the decoder puts
// it in, or nil when the decoder skips it (unknown field, other type).
// elem says the value is a list element or map entry, where a boolean
// takes a byte (in a struct field it is the field header's type).
func (w *thriftWalker) value(ct byte, t reflect.Type, depth int, elem bool) error {
	if depth > maxThriftDepth {
		return fmt.Errorf("thrift: nested more than %d levels", maxThriftDepth)
	}
	t = nullElem(t)
	switch ct {
	case ctTrue, ctFalse:
		if elem {
			_, err := w.byte1()
			return err
		}
		return nil
	case ctByte:
		_, err := w.byte1()
		return err
	case ctI16, ctI32, ctI64:
		_, err := w.uvarint()
		return err
	case ctDouble:
		return w.skip(8)
	case ctUUID:
		return w.skip(16)
	case ctBinary:
		n, err := w.uvarint()
		if err != nil {
			return err
		}
		if n > 1<<31-1 {
			return fmt.Errorf("thrift: binary of %d bytes", n)
		}
		if err := w.skip(n); err != nil {
			return err
		}
		if w.copyBinary && t != nil {
			w.alloc += int64(n)
		}
		return nil
	case ctList, ctSet:
		return w.list(t, depth)
	case ctMap:
		return w.mapValue(t, depth)
	case ctStruct:
		return w.structValue(t, depth)
	}
	return fmt.Errorf("thrift: unknown type %d at byte %d", ct, w.off)
}

func (w *thriftWalker) list(t reflect.Type, depth int) error {
	h, err := w.byte1()
	if err != nil {
		return err
	}
	n, et := uint64(h>>4), h&0x0f
	if n == 15 {
		if n, err = w.uvarint(); err != nil {
			return err
		}
	}
	// Every element takes at least one byte (booleans in a list are one
	// byte each), so a list longer than the bytes left is damaged; this
	// check comes before the decoder would allocate n elements.
	if n > uint64(len(w.b)-w.off) {
		return fmt.Errorf("thrift: list of %d elements in %d bytes", n, len(w.b)-w.off)
	}
	var elem reflect.Type
	if t != nil && t.Kind() == reflect.Slice {
		elem = t.Elem()
		w.alloc += int64(n) * int64(elem.Size())
	}
	for range n {
		if err := w.value(et, elem, depth+1, true); err != nil {
			return err
		}
	}
	return nil
}

func (w *thriftWalker) mapValue(t reflect.Type, depth int) error {
	n, err := w.uvarint()
	if err != nil || n == 0 {
		return err
	}
	kv, err := w.byte1()
	if err != nil {
		return err
	}
	if 2*n > uint64(len(w.b)-w.off) {
		return fmt.Errorf("thrift: map of %d entries in %d bytes", n, len(w.b)-w.off)
	}
	var kt, vt reflect.Type
	if t != nil && t.Kind() == reflect.Map {
		kt, vt = t.Key(), t.Elem()
		w.alloc += 2 * int64(n) * int64(kt.Size()+vt.Size()) // a Go map's buckets, roughly
	}
	for range n {
		if err := w.value(kv>>4, kt, depth+1, true); err != nil {
			return err
		}
		if err := w.value(kv&0x0f, vt, depth+1, true); err != nil {
			return err
		}
	}
	return nil
}

func (w *thriftWalker) structValue(t reflect.Type, depth int) error {
	var fields map[int16]reflect.Type
	if t != nil {
		if t.Kind() == reflect.Pointer {
			w.alloc += int64(t.Elem().Size())
			t = t.Elem()
		}
		if t.Kind() == reflect.Struct {
			fields = thriftFields(t)
		}
	}
	var id int16
	for {
		h, err := w.byte1()
		if err != nil {
			return err
		}
		ct := h & 0x0f
		if ct == ctStop {
			return nil
		}
		if d := h >> 4; d != 0 {
			id += int16(d)
		} else {
			v, err := w.uvarint()
			if err != nil {
				return err
			}
			id = int16(int64(v>>1) ^ -int64(v&1)) // zigzag
		}
		var ft reflect.Type
		if fields != nil {
			ft = fields[id]
			if ft != nil && !wireMatches(ct, ft) {
				ft = nil // the decoder skips a field of another type
			}
		}
		if err := w.value(ct, ft, depth+1, false); err != nil {
			return err
		}
	}
}

// nullElem unwraps thrift.Null[T], which the decoder fills in place.
func nullElem(t reflect.Type) reflect.Type {
	if t != nil && t.Kind() == reflect.Struct && t.PkgPath() == nullPkg && strings.HasPrefix(t.Name(), "Null[") {
		return t.Field(0).Type
	}
	return t
}

var nullPkg = reflect.TypeFor[thrift.Null[int32]]().PkgPath()

// wireMatches reports whether the decoder reads wire type ct into Go type
// t (after unwrapping Null); only lists, maps and structs matter for what
// the walk counts.
func wireMatches(ct byte, t reflect.Type) bool {
	t = nullElem(t)
	switch ct {
	case ctList, ctSet:
		return t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8
	case ctMap:
		return t.Kind() == reflect.Map
	case ctStruct:
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		return t.Kind() == reflect.Struct
	}
	return true
}

var fieldCache sync.Map // reflect.Type → map[int16]reflect.Type

// thriftFields maps the thrift field ids of struct t to their Go types; for
// a union, its members' ids to their (pointer) types.
func thriftFields(t reflect.Type) map[int16]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[int16]reflect.Type)
	}
	m := map[int16]reflect.Type{}
	if u, ok := reflect.New(t).Interface().(thrift.Union); ok {
		for _, mem := range u.UnionMembers() {
			m[mem.FieldID()] = reflect.TypeOf(mem)
		}
	} else {
		for i := range t.NumField() {
			f := t.Field(i)
			tag, ok := f.Tag.Lookup("thrift")
			if !ok {
				continue
			}
			idStr, _, _ := strings.Cut(tag, ",")
			id, err := strconv.ParseInt(idStr, 10, 16)
			if err != nil {
				continue
			}
			m[int16(id)] = f.Type
		}
	}
	fieldCache.Store(t, m)
	return m
}
