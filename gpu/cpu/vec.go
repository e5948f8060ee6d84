package cpu

// Vector primitives of the row ops (attention): dot products and
// y += alpha*x over short rows, one at a time or over m rows of a strided
// matrix in one call (dots, axpys: the same sums as m calls of dot and
// axpy, without the calls). The float32 backend on AVX2+FMA points them at
// the assembly kernels; everything else uses the Go loops, which sum in
// index order.
type vecOps[F float] struct {
	dot  func(a, b []F) F
	axpy func(alpha F, x, y []F)
	// dots sets out[j] = dot(q, k[j*stride:][:len(q)]) for j < len(out).
	dots func(q, k []F, stride int, out []F)
	// axpys adds alpha[j]*x[j*stride:][:len(y)] to y for j < len(alpha), in order.
	axpys func(alpha, x []F, stride int, y []F)
}

func goDot[F float](a, b []F) F {
	b = b[:len(a)]
	var s F
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func goAxpy[F float](alpha F, x, y []F) {
	y = y[:len(x)]
	for i := range x {
		y[i] += alpha * x[i]
	}
}

func vecDot(a, b []float32) float32 {
	if len(a) == 0 {
		return 0
	}
	_ = b[len(a)-1]
	return sdot(len(a), &a[0], &b[0])
}

func vecAxpy(alpha float32, x, y []float32) {
	if len(x) == 0 {
		return
	}
	_ = y[len(x)-1]
	saxpy(len(x), alpha, &x[0], &y[0])
}

func vecDots(q, k []float32, stride int, out []float32) {
	if len(out) == 0 || len(q) == 0 {
		for j := range out {
			out[j] = 0
		}
		return
	}
	_ = k[(len(out)-1)*stride+len(q)-1]
	sdots(len(q), &q[0], &k[0], stride, len(out), &out[0])
}

func vecAxpys(alpha, x []float32, stride int, y []float32) {
	if len(alpha) == 0 || len(y) == 0 {
		return
	}
	_ = x[(len(alpha)-1)*stride+len(y)-1]
	saxpys(len(y), &alpha[0], &x[0], stride, len(alpha), &y[0])
}

func goDots[F float](q, k []F, stride int, out []F) {
	for j := range out {
		out[j] = goDot(q, k[j*stride:][:len(q)])
	}
}

func goAxpys[F float](alpha, x []F, stride int, y []F) {
	for j, a := range alpha {
		goAxpy(a, x[j*stride:][:len(y)], y)
	}
}

func newVecOps[F float](vector bool) vecOps[F] {
	if vector {
		// F is float32 here: convert the functions through any.
		dot, _ := any(vecDot).(func(a, b []F) F)
		axpy, _ := any(vecAxpy).(func(alpha F, x, y []F))
		dots, _ := any(vecDots).(func(q, k []F, stride int, out []F))
		axpys, _ := any(vecAxpys).(func(alpha, x []F, stride int, y []F))
		if dot != nil && axpy != nil && dots != nil && axpys != nil {
			return vecOps[F]{dot, axpy, dots, axpys}
		}
	}
	return vecOps[F]{goDot[F], goAxpy[F], goDots[F], goAxpys[F]}
}
