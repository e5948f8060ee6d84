package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"sort"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// ValueType is the type tag of a metadata value.
type ValueType uint32

// Metadata value types, as numbered by the GGUF specification.
const (
	TypeUint8 ValueType = iota
	TypeInt8
	TypeUint16
	TypeInt16
	TypeUint32
	TypeInt32
	TypeFloat32
	TypeBool
	TypeString
	TypeArray
	TypeUint64
	TypeInt64
	TypeFloat64
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// minSize is the fewest bytes a value of type t takes in the file.
func (t ValueType) minSize() int64 {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeString, TypeUint64, TypeInt64, TypeFloat64:
		return 8
	case TypeArray:
		return 12
	}
	return 0
}

// Array is a metadata array: Values is a []uint8, []int8, []uint16,
// []int16, []uint32, []int32, []float32, []bool, []string, []uint64,
// []int64, []float64 or []Array, after Elem.
type Array struct {
	Elem   ValueType
	Values any
}

// Len returns the number of elements.
func (a Array) Len() int {
	if a.Values == nil {
		return 0
	}
	return reflect.ValueOf(a.Values).Len()
}

// KV is one metadata entry. Value holds a uint8, int8, uint16, int16,
// uint32, int32, float32, bool, string, uint64, int64, float64 or Array.
type KV struct {
	Key   string
	Type  ValueType
	Value any
}

// TensorInfo describes one tensor of the file. Dims are in GGUF order,
// the fastest-varying first (a Hugging Face [out, in] weight has Dims
// [in, out]).
type TensorInfo struct {
	Name string
	Dims []uint64
	Type Type
	// Offset is the tensor's position in the file (absolute).
	Offset int64
	// Size is the tensor's length in bytes.
	Size int64
}

// Elements returns the number of elements.
func (t TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= int64(d)
	}
	return n
}

// Shape returns the dimensions in row-major (Hugging Face) order.
func (t TensorInfo) Shape() []int {
	s := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		s[len(t.Dims)-1-i] = int(d)
	}
	return s
}

// File is an open GGUF file.
type File struct {
	Path      string
	Version   uint32
	KV        []KV
	Tensors   []TensorInfo
	Alignment int64
	// DataOffset is where the tensor data section starts.
	DataOffset int64

	kv     map[string]int
	tensor map[string]int
	f      *os.File
	size   int64
}

// Limits of what Open accepts, beyond fitting in the file.
const (
	maxDims     = 4
	maxElements = 1 << 40 // per tensor
	maxDepth    = 4       // nesting of arrays
	maxKeyBytes = 1 << 16
)

// Open reads path's header, metadata and tensor table; see the package
// comment for what is checked. Close releases the file.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("gguf: %w", err)
	}
	g, err := parse(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	g.Path, g.f = path, f
	return g, nil
}

// Close closes the file.
func (g *File) Close() error {
	if g.f == nil {
		return nil
	}
	err := g.f.Close()
	g.f = nil
	return err
}

// reader reads little-endian values, tracking its position so that every
// count can be checked against the bytes that remain.
type reader struct {
	r    *bufio.Reader
	pos  int64
	size int64
	buf  [8]byte
}

var errShort = errors.New("unexpected end of file")

func (r *reader) remaining() int64 { return r.size - r.pos }

func (r *reader) read(n int) ([]byte, error) {
	b := r.buf[:n]
	if _, err := io.ReadFull(r.r, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errShort
		}
		return nil, err
	}
	r.pos += int64(n)
	return b, nil
}

func (r *reader) u32() (uint32, error) {
	b, err := r.read(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *reader) u64() (uint64, error) {
	b, err := r.read(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// count reads a uint64 count of items that take at least min bytes each
// and checks that they fit in the rest of the file.
func (r *reader) count(what string, min int64) (int, error) {
	n, err := r.u64()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if min < 1 {
		min = 1
	}
	if n > uint64(r.remaining()/min) {
		return 0, fmt.Errorf("%s: %d items cannot fit in the %d bytes left", what, n, r.remaining())
	}
	return int(n), nil
}

func (r *reader) str(what string, limit int64) (string, error) {
	n, err := r.u64()
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if n > uint64(r.remaining()) {
		return "", fmt.Errorf("%s: length %d is past the end of the file (%d bytes left)", what, n, r.remaining())
	}
	if limit > 0 && n > uint64(limit) {
		return "", fmt.Errorf("%s: length %d is over the limit of %d", what, n, limit)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.r, b); err != nil {
		return "", fmt.Errorf("%s: %w", what, errShort)
	}
	r.pos += int64(n)
	return string(b), nil
}

func parse(ra io.ReaderAt, size int64) (*File, error) {
	r := &reader{r: bufio.NewReaderSize(io.NewSectionReader(ra, 0, size), 1<<16), size: size}
	magic, err := r.read(4)
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if string(magic) != Magic {
		return nil, fmt.Errorf("not a GGUF file (magic %q, want %q)", magic, Magic)
	}
	g := &File{kv: map[string]int{}, tensor: map[string]int{}, size: size, Alignment: 32}
	if g.Version, err = r.u32(); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if g.Version < 2 || g.Version > 3 {
		return nil, fmt.Errorf("GGUF version %d is not supported (want 2 or 3)", g.Version)
	}
	// A tensor entry takes at least 8 (name length) + 4 (dims) + 8 (one
	// dim) + 4 (type) + 8 (offset) bytes, a metadata entry 8 + 4 + 1.
	nt, err := r.count("tensor count", 32)
	if err != nil {
		return nil, err
	}
	nkv, err := r.count("metadata count", 13)
	if err != nil {
		return nil, err
	}
	g.KV = make([]KV, 0, nkv)
	for i := range nkv {
		key, err := r.str(fmt.Sprintf("metadata entry %d: key", i), maxKeyBytes)
		if err != nil {
			return nil, err
		}
		if _, dup := g.kv[key]; dup {
			return nil, fmt.Errorf("metadata key %q appears twice", key)
		}
		t, err := r.u32()
		if err != nil {
			return nil, fmt.Errorf("metadata %s: %w", key, err)
		}
		v, err := r.value(key, ValueType(t), 0)
		if err != nil {
			return nil, err
		}
		g.kv[key] = len(g.KV)
		g.KV = append(g.KV, KV{Key: key, Type: ValueType(t), Value: v})
	}
	if kv, ok := g.Lookup("general.alignment"); ok {
		a, ok := asUint(kv.Value)
		if !ok || a == 0 || a&(a-1) != 0 || a > 1<<20 {
			return nil, fmt.Errorf("metadata general.alignment %v is not a power of two up to 1 MiB", kv.Value)
		}
		g.Alignment = int64(a)
	}
	g.Tensors = make([]TensorInfo, 0, nt)
	for i := range nt {
		t, err := r.tensorInfo(i)
		if err != nil {
			return nil, err
		}
		if _, dup := g.tensor[t.Name]; dup {
			return nil, fmt.Errorf("tensor %q appears twice", t.Name)
		}
		g.tensor[t.Name] = len(g.Tensors)
		g.Tensors = append(g.Tensors, t)
	}
	g.DataOffset = (r.pos + g.Alignment - 1) / g.Alignment * g.Alignment
	if err := g.placeTensors(); err != nil {
		return nil, err
	}
	return g, nil
}

func (r *reader) value(key string, t ValueType, depth int) (any, error) {
	fail := func(err error) (any, error) { return nil, fmt.Errorf("metadata %s: %w", key, err) }
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		b, err := r.read(1)
		if err != nil {
			return fail(err)
		}
		switch t {
		case TypeInt8:
			return int8(b[0]), nil
		case TypeBool:
			if b[0] > 1 {
				return fail(fmt.Errorf("bool byte %d is neither 0 nor 1", b[0]))
			}
			return b[0] == 1, nil
		}
		return b[0], nil
	case TypeUint16, TypeInt16:
		b, err := r.read(2)
		if err != nil {
			return fail(err)
		}
		u := binary.LittleEndian.Uint16(b)
		if t == TypeInt16 {
			return int16(u), nil
		}
		return u, nil
	case TypeUint32, TypeInt32, TypeFloat32:
		u, err := r.u32()
		if err != nil {
			return fail(err)
		}
		switch t {
		case TypeInt32:
			return int32(u), nil
		case TypeFloat32:
			return math.Float32frombits(u), nil
		}
		return u, nil
	case TypeUint64, TypeInt64, TypeFloat64:
		u, err := r.u64()
		if err != nil {
			return fail(err)
		}
		switch t {
		case TypeInt64:
			return int64(u), nil
		case TypeFloat64:
			return math.Float64frombits(u), nil
		}
		return u, nil
	case TypeString:
		return r.str("metadata "+key, 0)
	case TypeArray:
		if depth >= maxDepth {
			return fail(fmt.Errorf("arrays nested more than %d deep", maxDepth))
		}
		et, err := r.u32()
		if err != nil {
			return fail(err)
		}
		elem := ValueType(et)
		if elem.minSize() == 0 {
			return fail(fmt.Errorf("unknown array element type %d", et))
		}
		n, err := r.count("metadata "+key+": array length", elem.minSize())
		if err != nil {
			return nil, err
		}
		return r.array(key, elem, n, depth)
	}
	return fail(fmt.Errorf("unknown value type %d", uint32(t)))
}

func (r *reader) array(key string, elem ValueType, n, depth int) (any, error) {
	a := Array{Elem: elem}
	switch elem {
	case TypeString:
		v := make([]string, n)
		for i := range v {
			s, err := r.str(fmt.Sprintf("metadata %s[%d]", key, i), 0)
			if err != nil {
				return nil, err
			}
			v[i] = s
		}
		a.Values = v
		return a, nil
	case TypeArray:
		v := make([]Array, n)
		for i := range v {
			x, err := r.value(fmt.Sprintf("%s[%d]", key, i), TypeArray, depth+1)
			if err != nil {
				return nil, err
			}
			v[i] = x.(Array)
		}
		a.Values = v
		return a, nil
	}
	// Fixed-size elements: read them all, then decode.
	w := int(elem.minSize())
	raw := make([]byte, n*w)
	if _, err := io.ReadFull(r.r, raw); err != nil {
		return nil, fmt.Errorf("metadata %s: %w", key, errShort)
	}
	r.pos += int64(len(raw))
	le := binary.LittleEndian
	switch elem {
	case TypeUint8:
		a.Values = raw
	case TypeInt8:
		a.Values = decodeFixed(raw, 1, func(b []byte) int8 { return int8(b[0]) })
	case TypeBool:
		for i, c := range raw {
			if c > 1 {
				return nil, fmt.Errorf("metadata %s[%d]: bool byte %d is neither 0 nor 1", key, i, c)
			}
		}
		a.Values = decodeFixed(raw, 1, func(b []byte) bool { return b[0] == 1 })
	case TypeUint16:
		a.Values = decodeFixed(raw, 2, le.Uint16)
	case TypeInt16:
		a.Values = decodeFixed(raw, 2, func(b []byte) int16 { return int16(le.Uint16(b)) })
	case TypeUint32:
		a.Values = decodeFixed(raw, 4, le.Uint32)
	case TypeInt32:
		a.Values = decodeFixed(raw, 4, func(b []byte) int32 { return int32(le.Uint32(b)) })
	case TypeFloat32:
		a.Values = decodeFixed(raw, 4, func(b []byte) float32 { return math.Float32frombits(le.Uint32(b)) })
	case TypeUint64:
		a.Values = decodeFixed(raw, 8, le.Uint64)
	case TypeInt64:
		a.Values = decodeFixed(raw, 8, func(b []byte) int64 { return int64(le.Uint64(b)) })
	case TypeFloat64:
		a.Values = decodeFixed(raw, 8, func(b []byte) float64 { return math.Float64frombits(le.Uint64(b)) })
	}
	return a, nil
}

// decodeFixed decodes raw as consecutive w-byte elements.
func decodeFixed[T any](raw []byte, w int, dec func([]byte) T) []T {
	v := make([]T, len(raw)/w)
	for i := range v {
		v[i] = dec(raw[w*i:])
	}
	return v
}

func (r *reader) tensorInfo(i int) (TensorInfo, error) {
	var t TensorInfo
	name, err := r.str(fmt.Sprintf("tensor %d: name", i), maxKeyBytes)
	if err != nil {
		return t, err
	}
	t.Name = name
	fail := func(format string, a ...any) (TensorInfo, error) {
		return t, fmt.Errorf("tensor %s: "+format, append([]any{name}, a...)...)
	}
	nd, err := r.u32()
	if err != nil {
		return fail("%w", err)
	}
	if nd == 0 || nd > maxDims {
		return fail("%d dimensions (want 1 to %d)", nd, maxDims)
	}
	t.Dims = make([]uint64, nd)
	n := uint64(1)
	for k := range t.Dims {
		if t.Dims[k], err = r.u64(); err != nil {
			return fail("%w", err)
		}
		if t.Dims[k] == 0 || t.Dims[k] > maxElements/n {
			return fail("dimensions %v: a dimension is 0 or the tensor has over 2^40 elements", t.Dims[:k+1])
		}
		n *= t.Dims[k]
	}
	ty, err := r.u32()
	if err != nil {
		return fail("%w", err)
	}
	t.Type = Type(ty)
	off, err := r.u64()
	if err != nil {
		return fail("%w", err)
	}
	if off > uint64(r.size) {
		return fail("data offset %d is past the end of the file", off)
	}
	t.Offset = int64(off) // relative until placeTensors
	tr, ok := t.Type.traits()
	if !ok {
		return fail("type %s is not supported", t.Type)
	}
	if t.Dims[0]%uint64(tr.block) != 0 {
		return fail("type %s packs %d elements a block, but its rows have %d", t.Type, tr.block, t.Dims[0])
	}
	t.Size = int64(n/uint64(tr.block)) * int64(tr.bytes)
	return t, nil
}

// placeTensors makes offsets absolute and checks each tensor's alignment,
// that it lies inside the file, and that no two overlap.
func (g *File) placeTensors() error {
	order := make([]int, len(g.Tensors))
	for i := range g.Tensors {
		t := &g.Tensors[i]
		if t.Offset%g.Alignment != 0 {
			return fmt.Errorf("tensor %s: data offset %d is not a multiple of the alignment %d", t.Name, t.Offset, g.Alignment)
		}
		t.Offset += g.DataOffset
		if t.Offset > g.size || t.Size > g.size-t.Offset {
			return fmt.Errorf("tensor %s: %d bytes at offset %d run past the end of the file (%d bytes)", t.Name, t.Size, t.Offset, g.size)
		}
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return g.Tensors[order[a]].Offset < g.Tensors[order[b]].Offset })
	for k := 1; k < len(order); k++ {
		p, t := g.Tensors[order[k-1]], g.Tensors[order[k]]
		if p.Offset+p.Size > t.Offset {
			return fmt.Errorf("tensors %s and %s overlap", p.Name, t.Name)
		}
	}
	return nil
}

// Lookup returns the metadata entry for key.
func (g *File) Lookup(key string) (KV, bool) {
	i, ok := g.kv[key]
	if !ok {
		return KV{}, false
	}
	return g.KV[i], true
}

// Tensor returns the tensor named name.
func (g *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := g.tensor[name]
	if !ok {
		return TensorInfo{}, false
	}
	return g.Tensors[i], true
}

// String returns the string value of key.
func (g *File) String(key string) (string, error) {
	kv, ok := g.Lookup(key)
	if !ok {
		return "", fmt.Errorf("gguf: %s: no metadata key %s", g.Path, key)
	}
	s, ok := kv.Value.(string)
	if !ok {
		return "", fmt.Errorf("gguf: %s: metadata %s is a %s, want a string", g.Path, key, kv.Type)
	}
	return s, nil
}

// Uint returns the value of key, which must be a non-negative integer.
func (g *File) Uint(key string) (uint64, error) {
	kv, ok := g.Lookup(key)
	if !ok {
		return 0, fmt.Errorf("gguf: %s: no metadata key %s", g.Path, key)
	}
	u, ok := asUint(kv.Value)
	if !ok {
		return 0, fmt.Errorf("gguf: %s: metadata %s is %v (%s), want a non-negative integer", g.Path, key, kv.Value, kv.Type)
	}
	return u, nil
}

// Float returns the value of key, which must be a number.
func (g *File) Float(key string) (float64, error) {
	kv, ok := g.Lookup(key)
	if !ok {
		return 0, fmt.Errorf("gguf: %s: no metadata key %s", g.Path, key)
	}
	switch v := kv.Value.(type) {
	case float32:
		return float64(v), nil
	case float64:
		return v, nil
	}
	if u, ok := asUint(kv.Value); ok {
		return float64(u), nil
	}
	return 0, fmt.Errorf("gguf: %s: metadata %s is a %s, want a number", g.Path, key, kv.Type)
}

func asUint(v any) (uint64, bool) {
	switch x := v.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	case int8:
		return uint64(x), x >= 0
	case int16:
		return uint64(x), x >= 0
	case int32:
		return uint64(x), x >= 0
	case int64:
		return uint64(x), x >= 0
	}
	return 0, false
}
