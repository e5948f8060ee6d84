// Package parquettest damages Parquet files for tests of the readers: the
// random footer mutations that found parquet-go's panics, and a check of
// whether parquet-go alone, called as swerl once called it, panics on a
// file.
package parquettest

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go"
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
// and reading every row, panics.
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
