// Package bincode holds the primitives of swerl's hand-written binary
// coders: the records that cross a pipeline's shuffle or a staging file,
// written and read by the same program, where JSON or gob cost a large
// share of the CPU (the train pipeline's parts, the mining pipeline's
// staged instances).
//
// Integers are varints, floats their IEEE bits little-endian, strings and
// lists length-prefixed. Optional lists and maps store their count plus one,
// so 0 is nil and 1 is empty: a round trip keeps them apart.
//
// A Decoder never panics on damaged input: the first error sticks, every
// later read returns a zero value, and a length the remaining bytes cannot
// hold is refused before anything is allocated.
package bincode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// AppendString appends s, length-prefixed.
func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendList appends an optional list: its count plus one (0 for nil),
// then each item.
func appendList[T any](b []byte, xs []T, item func([]byte, T) []byte) []byte {
	if xs == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(xs))+1)
	for _, x := range xs {
		b = item(b, x)
	}
	return b
}

// AppendStrings appends an optional list of strings.
func AppendStrings(b []byte, xs []string) []byte { return appendList(b, xs, AppendString) }

// appendMap appends an optional map: its count plus one (0 for nil), then
// each pair, in map order (the encoding of a map is not deterministic).
func appendMap[V any](b []byte, m map[string]V, value func([]byte, V) []byte) []byte {
	if m == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(m))+1)
	for k, v := range m {
		b = AppendString(b, k)
		b = value(b, v)
	}
	return b
}

// AppendStringMap appends an optional map of strings.
func AppendStringMap(b []byte, m map[string]string) []byte { return appendMap(b, m, AppendString) }

// AppendFloatMap appends an optional map of float64s.
func AppendFloatMap(b []byte, m map[string]float64) []byte { return appendMap(b, m, AppendFloat) }

// AppendInt appends a signed integer.
func AppendInt(b []byte, x int64) []byte { return binary.AppendVarint(b, x) }

// AppendInts appends an optional list of ints.
func AppendInts(b []byte, xs []int) []byte {
	return appendList(b, xs, func(b []byte, x int) []byte { return binary.AppendVarint(b, int64(x)) })
}

// AppendInt32s appends an optional list of int32s.
func AppendInt32s(b []byte, xs []int32) []byte {
	return appendList(b, xs, func(b []byte, x int32) []byte { return binary.AppendVarint(b, int64(x)) })
}

// AppendFloat appends a float64.
func AppendFloat(b []byte, f float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
}

// AppendFloat32s appends an optional list of float32s.
func AppendFloat32s(b []byte, xs []float32) []byte {
	return appendList(b, xs, func(b []byte, f float32) []byte { return binary.LittleEndian.AppendUint32(b, math.Float32bits(f)) })
}

// AppendBool appends a bool as one byte.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// AppendCount appends the length of a list that is never nil.
func AppendCount(b []byte, n int) []byte { return binary.AppendUvarint(b, uint64(n)) }

// AppendOptCount appends the count of an optional list or map (nil: -1).
func AppendOptCount(b []byte, n int) []byte { return binary.AppendUvarint(b, uint64(n+1)) }

// MapLen estimates the encoded size of a map, for preallocation.
func MapLen(m map[string]string) int {
	n := 0
	for k, v := range m {
		n += len(k) + len(v) + 4
	}
	return n
}

// ErrShort is the error of input that ends inside a value.
var ErrShort = errors.New("truncated")

// Decoder reads what the Append functions wrote.
type Decoder struct {
	b   []byte
	err error
}

// NewDecoder reads b.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

// Err is the first error met, if any.
func (d *Decoder) Err() error { return d.err }

// Len is the number of bytes not yet read.
func (d *Decoder) Len() int { return len(d.b) }

// Fail records err (unless an error is already recorded) and stops reading.
func (d *Decoder) Fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

// End fails unless every byte has been read.
func (d *Decoder) End() error {
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes after the value", len(d.b))
	}
	return d.err
}

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if len(d.b) < 1 {
		d.Fail(ErrShort)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// Version reads the format version byte a coder writes first, failing
// unless it is want (a record of another format is refused, not misread).
func (d *Decoder) Version(want byte) {
	if v := d.Byte(); d.err == nil && v != want {
		d.Fail(fmt.Errorf("format version %d, want %d", v, want))
	}
}

// Bool reads a bool written by AppendBool.
func (d *Decoder) Bool() bool {
	switch d.Byte() {
	case 0:
		return false
	case 1:
		return true
	default:
		d.Fail(errors.New("bool is not 0 or 1"))
		return false
	}
}

// varint reads an integer with read (binary.Uvarint or binary.Varint).
func varint[T uint64 | int64](d *Decoder, read func([]byte) (T, int)) T {
	x, n := read(d.b)
	if n <= 0 {
		d.Fail(ErrShort)
		return 0
	}
	d.b = d.b[n:]
	return x
}

func (d *Decoder) uvarint() uint64 { return varint(d, binary.Uvarint) }

// Int64 reads a signed integer.
func (d *Decoder) Int64() int64 { return varint(d, binary.Varint) }

// Int reads a signed integer that must fit an int.
func (d *Decoder) Int() int {
	x := d.Int64()
	if x < math.MinInt || x > math.MaxInt {
		d.Fail(fmt.Errorf("integer %d out of range", x))
	}
	return int(x)
}

// Count reads a length whose items take at least minBytes each, refusing
// one the remaining input cannot hold (no huge allocation from a bad
// length).
func (d *Decoder) Count(minBytes int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/minBytes) {
		d.Fail(fmt.Errorf("length %d exceeds the %d bytes left", n, len(d.b)))
		return 0
	}
	return int(n)
}

// OptCount reads the count of an optional list or map whose items take at
// least minBytes each, and says whether the value is present (not nil).
func (d *Decoder) OptCount(minBytes int) (int, bool) {
	n := d.uvarint()
	if n == 0 {
		return 0, false
	}
	if n-1 > uint64(len(d.b)/minBytes) {
		d.Fail(fmt.Errorf("length %d exceeds the %d bytes left", n-1, len(d.b)))
		return 0, false
	}
	return int(n - 1), d.err == nil
}

// String reads a string.
func (d *Decoder) String() string {
	n := d.Count(1)
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// list reads an optional list whose items take at least minBytes each.
func list[T any](d *Decoder, minBytes int, item func() T) []T {
	n, ok := d.OptCount(minBytes)
	if !ok {
		return nil
	}
	xs := make([]T, n)
	for i := range xs {
		xs[i] = item()
	}
	return xs
}

// Strings reads an optional list of strings.
func (d *Decoder) Strings() []string { return list(d, 1, d.String) }

// Float reads a float64.
func (d *Decoder) Float() float64 {
	if len(d.b) < 8 {
		d.Fail(ErrShort)
		return 0
	}
	f := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return f
}

// readMap reads an optional map whose values take at least minBytes each.
func readMap[V any](d *Decoder, minBytes int, value func() V) map[string]V {
	n, ok := d.OptCount(1 + minBytes)
	if !ok {
		return nil
	}
	m := make(map[string]V, n)
	for range n {
		k := d.String()
		m[k] = value()
	}
	return m
}

// StringMap reads an optional map of strings.
func (d *Decoder) StringMap() map[string]string { return readMap(d, 1, d.String) }

// FloatMap reads an optional map of float64s.
func (d *Decoder) FloatMap() map[string]float64 { return readMap(d, 8, d.Float) }

// Ints reads an optional list of ints.
func (d *Decoder) Ints() []int { return list(d, 1, d.Int) }

// Int32s reads an optional list of int32s.
func (d *Decoder) Int32s() []int32 {
	return list(d, 1, func() int32 {
		x := d.Int64()
		if x < math.MinInt32 || x > math.MaxInt32 {
			d.Fail(fmt.Errorf("value %d outside int32", x))
		}
		return int32(x)
	})
}

// Float32s reads an optional list of float32s.
func (d *Decoder) Float32s() []float32 {
	return list(d, 4, func() float32 { // OptCount checked the bytes are there
		f := math.Float32frombits(binary.LittleEndian.Uint32(d.b))
		d.b = d.b[4:]
		return f
	})
}
