package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"swerl/gpu/hf"
)

// Type is a ggml tensor type.
type Type uint32

// The ggml tensor types, as numbered by ggml.h. Those with traits are the
// ones Open accepts; Float32 reads the ones with a dequantizer.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
)

// traits is a type's block: elements per block and bytes per block, and
// whether Float32 can dequantize it.
type traits struct {
	name         string
	block, bytes int
	dequant      func(dst []float32, src []byte)
}

// qk is the super-block size of the k-quants.
const qk = 256

var typeTraits = map[Type]traits{
	F32:     {"F32", 1, 4, dequantF32},
	F16:     {"F16", 1, 2, dequantF16},
	BF16:    {"BF16", 1, 2, dequantBF16},
	Q4_0:    {"Q4_0", 32, 18, dequantQ4_0},
	Q4_1:    {"Q4_1", 32, 20, dequantQ4_1},
	Q5_0:    {"Q5_0", 32, 22, dequantQ5_0},
	Q5_1:    {"Q5_1", 32, 24, dequantQ5_1},
	Q8_0:    {"Q8_0", 32, 34, dequantQ8_0},
	Q8_1:    {"Q8_1", 32, 36, nil},
	Q2_K:    {"Q2_K", qk, 84, nil},
	Q3_K:    {"Q3_K", qk, 110, nil},
	Q4_K:    {"Q4_K", qk, 144, dequantQ4_K},
	Q5_K:    {"Q5_K", qk, 176, dequantQ5_K},
	Q6_K:    {"Q6_K", qk, 210, dequantQ6_K},
	Q8_K:    {"Q8_K", qk, 292, nil},
	IQ2_XXS: {"IQ2_XXS", qk, 66, nil},
	IQ2_XS:  {"IQ2_XS", qk, 74, nil},
	IQ3_XXS: {"IQ3_XXS", qk, 98, nil},
	IQ1_S:   {"IQ1_S", qk, 50, nil},
	IQ4_NL:  {"IQ4_NL", 32, 18, nil},
	IQ3_S:   {"IQ3_S", qk, 110, nil},
	IQ2_S:   {"IQ2_S", qk, 82, nil},
	IQ4_XS:  {"IQ4_XS", qk, 136, nil},
	I8:      {"I8", 1, 1, nil},
	I16:     {"I16", 1, 2, nil},
	I32:     {"I32", 1, 4, nil},
	I64:     {"I64", 1, 8, nil},
	F64:     {"F64", 1, 8, nil},
	IQ1_M:   {"IQ1_M", qk, 56, nil},
}

func (t Type) traits() (traits, bool) {
	tr, ok := typeTraits[t]
	return tr, ok
}

func (t Type) String() string {
	if tr, ok := typeTraits[t]; ok {
		return tr.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Dequantizable reports whether Float32 reads tensors of type t.
func (t Type) Dequantizable() bool {
	tr, ok := typeTraits[t]
	return ok && tr.dequant != nil
}

// readChunk is how many bytes Float32 reads at a time.
const readChunk = 1 << 20

// Float32 returns the tensor's elements as float32, in GGUF order (the
// first dimension fastest), appended to dst[:0]. A type without a
// dequantizer is an error naming the tensor and its type.
func (g *File) Float32(t TensorInfo, dst []float32) ([]float32, error) {
	tr, ok := t.Type.traits()
	if !ok || tr.dequant == nil {
		return nil, fmt.Errorf("gguf: %s: tensor %s has type %s, which swerl does not dequantize (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K)", g.Path, t.Name, t.Type)
	}
	if g.f == nil {
		return nil, fmt.Errorf("gguf: %s: file is closed", g.Path)
	}
	n := t.Elements()
	if int64(cap(dst)) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	blocksPerChunk := max(1, readChunk/tr.bytes)
	buf := make([]byte, blocksPerChunk*tr.bytes)
	nblocks := n / int64(tr.block)
	for b := int64(0); b < nblocks; b += int64(blocksPerChunk) {
		k := min(int64(blocksPerChunk), nblocks-b)
		raw := buf[:k*int64(tr.bytes)]
		if _, err := g.f.ReadAt(raw, t.Offset+b*int64(tr.bytes)); err != nil {
			return nil, fmt.Errorf("gguf: %s: tensor %s: %w", g.Path, t.Name, err)
		}
		out := dst[b*int64(tr.block) : (b+k)*int64(tr.block)]
		for i := range k {
			tr.dequant(out[i*int64(tr.block):(i+1)*int64(tr.block)], raw[i*int64(tr.bytes):(i+1)*int64(tr.bytes)])
		}
	}
	return dst, nil
}

// Dequantize decodes whole blocks of type t from src into dst, which must
// hold len(src)/bytes-per-block blocks of elements.
func Dequantize(t Type, dst []float32, src []byte) error {
	tr, ok := t.traits()
	if !ok || tr.dequant == nil {
		return fmt.Errorf("gguf: type %s has no dequantizer", t)
	}
	if len(src)%tr.bytes != 0 || len(dst) != len(src)/tr.bytes*tr.block {
		return fmt.Errorf("gguf: %s: %d bytes and %d elements are not whole blocks of %d bytes and %d elements", t, len(src), len(dst), tr.bytes, tr.block)
	}
	for i := 0; i < len(src)/tr.bytes; i++ {
		tr.dequant(dst[i*tr.block:(i+1)*tr.block], src[i*tr.bytes:(i+1)*tr.bytes])
	}
	return nil
}

func f16(b []byte) float32 { return hf.F16ToFloat32(binary.LittleEndian.Uint16(b)) }

func dequantF32(dst []float32, src []byte) {
	dst[0] = math.Float32frombits(binary.LittleEndian.Uint32(src))
}

func dequantF16(dst []float32, src []byte) { dst[0] = f16(src) }

func dequantBF16(dst []float32, src []byte) {
	dst[0] = hf.BF16ToFloat32(binary.LittleEndian.Uint16(src))
}

// The block dequantizers below follow ggml-quants.c's dequantize_row_*
// for one block, with the same float32 operations in the same order.

func dequantQ4_0(y []float32, x []byte) {
	d := f16(x)
	qs := x[2:18]
	for j := range 16 {
		y[j] = float32(int(qs[j]&0xF)-8) * d
		y[j+16] = float32(int(qs[j]>>4)-8) * d
	}
}

func dequantQ4_1(y []float32, x []byte) {
	d, m := f16(x), f16(x[2:])
	qs := x[4:20]
	for j := range 16 {
		y[j] = float32(qs[j]&0xF)*d + m
		y[j+16] = float32(qs[j]>>4)*d + m
	}
}

func dequantQ5_0(y []float32, x []byte) {
	d := f16(x)
	qh := binary.LittleEndian.Uint32(x[2:])
	qs := x[6:22]
	for j := range 16 {
		xh0 := byte((qh>>uint(j))<<4) & 0x10
		xh1 := byte(qh>>uint(j+12)) & 0x10
		y[j] = float32(int(qs[j]&0xF|xh0)-16) * d
		y[j+16] = float32(int(qs[j]>>4|xh1)-16) * d
	}
}

func dequantQ5_1(y []float32, x []byte) {
	d, m := f16(x), f16(x[2:])
	qh := binary.LittleEndian.Uint32(x[4:])
	qs := x[8:24]
	for j := range 16 {
		xh0 := byte((qh>>uint(j))<<4) & 0x10
		xh1 := byte(qh>>uint(j+12)) & 0x10
		y[j] = float32(qs[j]&0xF|xh0)*d + m
		y[j+16] = float32(qs[j]>>4|xh1)*d + m
	}
}

func dequantQ8_0(y []float32, x []byte) {
	d := f16(x)
	for j := range 32 {
		y[j] = float32(int8(x[2+j])) * d
	}
}

// scaleMinK4 unpacks the j-th 6-bit scale and min of a Q4_K or Q5_K block.
func scaleMinK4(j int, q []byte) (sc, m byte) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xF | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

func dequantQ4_K(y []float32, x []byte) {
	d, dmin := f16(x), f16(x[2:])
	scales := x[4:16]
	q := x[16:144]
	is := 0
	for j := 0; j < qk; j += 64 {
		sc, m := scaleMinK4(is, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = scaleMinK4(is+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		for l := range 32 {
			y[j+l] = d1*float32(q[l]&0xF) - m1
		}
		for l := range 32 {
			y[j+32+l] = d2*float32(q[l]>>4) - m2
		}
		q = q[32:]
		is += 2
	}
}

func dequantQ5_K(y []float32, x []byte) {
	d, dmin := f16(x), f16(x[2:])
	scales := x[4:16]
	qh := x[16:48]
	ql := x[48:176]
	is := 0
	u1, u2 := byte(1), byte(2)
	for j := 0; j < qk; j += 64 {
		sc, m := scaleMinK4(is, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = scaleMinK4(is+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		for l := range 32 {
			h := byte(0)
			if qh[l]&u1 != 0 {
				h = 16
			}
			y[j+l] = d1*float32(ql[l]&0xF+h) - m1
		}
		for l := range 32 {
			h := byte(0)
			if qh[l]&u2 != 0 {
				h = 16
			}
			y[j+32+l] = d2*float32(ql[l]>>4+h) - m2
		}
		ql = ql[32:]
		is += 2
		u1 <<= 2
		u2 <<= 2
	}
}

func dequantQ6_K(y []float32, x []byte) {
	ql := x[0:128]
	qh := x[128:192]
	sc := x[192:208]
	d := f16(x[208:])
	for n := 0; n < qk; n += 128 {
		for l := range 32 {
			is := l / 16
			q1 := int(int8(ql[l]&0xF|(qh[l]>>0&3)<<4)) - 32
			q2 := int(int8(ql[l+32]&0xF|(qh[l]>>2&3)<<4)) - 32
			q3 := int(int8(ql[l]>>4|(qh[l]>>4&3)<<4)) - 32
			q4 := int(int8(ql[l+32]>>4|(qh[l]>>6&3)<<4)) - 32
			y[n+l] = d * float32(int8(sc[is])) * float32(q1)
			y[n+l+32] = d * float32(int8(sc[is+2])) * float32(q2)
			y[n+l+64] = d * float32(int8(sc[is+4])) * float32(q3)
			y[n+l+96] = d * float32(int8(sc[is+6])) * float32(q4)
		}
		ql = ql[64:]
		qh = qh[32:]
		sc = sc[8:]
	}
}
