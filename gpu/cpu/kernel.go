package cpu

// kernel3x3 returns the 9 dot products a_i·b_j over the first n elements of
// three rows of A and three rows of B (result index 3*i+j).
//
// Why 3x3: amd64 Go code has 15 usable float registers and the compiler
// does not fuse or vectorise; 9 accumulators, 3 B values and a copy of
// the A value fit without spilling, while 4x4 spilled every iteration and
// measured 30% slower. Every sum runs over k in order, exactly like dot, so
// the tile geometry never changes a result bit.
func kernel3x3[F float](a0, a1, a2, b0, b1, b2 []F, n int) (s [9]F) {
	a0, a1, a2, b0, b1, b2 = a0[:n], a1[:n], a2[:n], b0[:n], b1[:n], b2[:n]
	var c00, c01, c02, c10, c11, c12, c20, c21, c22 F
	for k := range n {
		y0, y1, y2 := b0[k], b1[k], b2[k]
		x := a0[k]
		c00 += x * y0
		c01 += x * y1
		c02 += x * y2
		x = a1[k]
		c10 += x * y0
		c11 += x * y1
		c12 += x * y2
		x = a2[k]
		c20 += x * y0
		c21 += x * y1
		c22 += x * y2
	}
	return [9]F{c00, c01, c02, c10, c11, c12, c20, c21, c22}
}
