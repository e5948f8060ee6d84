// Package parquettest damages Parquet files for tests of the readers: the
// random footer mutations that found parquet-go's panics, mutations of the
// schema in the footer that keep it well-formed (a renamed or retyped
// column), and a check of whether parquet-go alone, called as swerl once
// called it, panics on a file.
package parquettest

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// MutateFooter returns a copy of b with 1 to 4 random bytes of its footer
// (the file metadata and its length field) changed.
func MutateFooter(rng *rand.Rand, b []byte) []byte {
	m := bytes.Clone(b)
	footerLen := int(binary.LittleEndian.Uint32(m[len(m)-8:]))
	start := max(len(m)-8-footerLen, 4)
	for range 1 + rng.IntN(4) {
		i := start + rng.IntN(len(m)-4-start)
		switch rng.IntN(3) {
		case 0:
			m[i] ^= 1 << rng.IntN(8)
		case 1:
			m[i] = byte(rng.IntN(256))
		default:
			m[i] = []byte{0x00, 0x7f, 0x80, 0xff, 0x0f, 0xf0}[rng.IntN(6)]
		}
	}
	return m
}

// ParquetGoPanics reports whether parquet-go, opening b with its defaults
// and reading every row, panics. A file whose footer names a codec other
// than UNCOMPRESSED, SNAPPY and ZSTD (a mutated codec field) is not read,
// and reported as no panic: parquet-go's LZ4 and GZIP decoders allocate
// what the page header declares, and a damaged header can declare tens of
// GiB, which kills the process instead of panicking (swerl's reader
// refuses those codecs).
func ParquetGoPanics(b []byte) (panicked bool) {
	defer func() {
		if recover() != nil {
			panicked = true
		}
	}()
	pf, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return false
	}
	for _, rg := range pf.Metadata().RowGroups {
		for _, c := range rg.Columns {
			switch c.MetaData.Codec {
			case format.Uncompressed, format.Snappy, format.Zstd:
			default:
				return false
			}
		}
	}
	r := parquet.NewReader(pf)
	rows := make([]parquet.Row, 16)
	for {
		if _, err := r.ReadRows(rows); err != nil {
			return false
		}
	}
}

// PanickingMutation returns a footer mutation of b on which parquet-go
// alone panics (a few in a hundred do), failing tb if 20000 tries find
// none.
func PanickingMutation(tb testing.TB, b []byte, seed uint64) []byte {
	tb.Helper()
	rng := rand.New(rand.NewPCG(seed, seed))
	for range 20000 {
		if m := MutateFooter(rng, b); ParquetGoPanics(m) {
			return m
		}
	}
	tb.Fatal("no footer mutation makes parquet-go panic")
	return nil
}

// SchemaMutation says what MutateSchema changed.
type SchemaMutation struct {
	Element int    // index in the footer's flattened schema (0 is the root)
	Name    string // the element's name before the change
	Leaf    bool   // the element is a column (it has a type)
	Op      string // "rename", "type", "repetition", "children", "drop", "logical"
}

// MutateSchema returns a copy of b with one element of its schema (the
// column tree in the footer, whose bytes MutateFooter rarely hits in a way
// that still decodes) changed and the footer encoded again, so the file
// stays well-formed thrift: a byte of a name flipped, the physical type,
// the repetition or the child count changed, the logical type dropped, or
// the element removed. ok is false when b's footer does not decode or has
// no column.
func MutateSchema(rng *rand.Rand, b []byte) (out []byte, m SchemaMutation, ok bool) {
	if len(b) < 12 {
		return nil, m, false
	}
	n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	start := len(b) - 8 - n
	if n <= 0 || start < 4 {
		return nil, m, false
	}
	var md format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), b[start:len(b)-8], &md); err != nil || len(md.Schema) < 2 {
		return nil, m, false
	}
	i := 1 + rng.IntN(len(md.Schema)-1)
	e := &md.Schema[i]
	m = SchemaMutation{Element: i, Name: e.Name, Leaf: e.Type.Valid}
	switch k := rng.IntN(6); {
	case (k == 0 || k == 1) && e.Name != "": // names are the likeliest to survive a flipped byte
		name := []byte(e.Name)
		j := rng.IntN(len(name))
		for name[j] == e.Name[j] {
			name[j] ^= byte(1 << rng.IntN(7))
		}
		e.Name, m.Op = string(name), "rename"
	case k == 2:
		t := format.Type(rng.IntN(8))
		if e.Type.Valid && e.Type.V == t {
			t = (t + 1) % 8
		}
		e.Type.Valid, e.Type.V, m.Op = true, t, "type"
	case k == 3:
		e.RepetitionType.Valid, e.RepetitionType.V, m.Op = true, format.FieldRepetitionType(rng.IntN(3)), "repetition"
	case k == 4:
		e.NumChildren.Valid, e.NumChildren.V, m.Op = true, int32(rng.IntN(4)), "children"
	default:
		if rng.IntN(2) == 0 {
			e.LogicalType, e.ConvertedType.Valid, m.Op = format.LogicalType{}, false, "logical"
		} else {
			md.Schema, m.Op = append(md.Schema[:i:i], md.Schema[i+1:]...), "drop"
		}
	}
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), &md)
	if err != nil {
		return nil, m, false
	}
	out = append(bytes.Clone(b[:start]), footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	return append(out, "PAR1"...), m, true
}
