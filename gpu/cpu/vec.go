package cpu

// Vector primitives of the row ops (attention): dot products and
// y += alpha*x over short rows. The float32 backend on AVX2+FMA points
// them at the assembly kernels; everything else uses the Go loops, which
// sum in index order.
type vecOps[F float] struct {
	dot  func(a, b []F) F
	axpy func(alpha F, x, y []F)
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

func newVecOps[F float](vector bool) vecOps[F] {
	if vector {
		// F is float32 here: convert the functions through any.
		dot, _ := any(vecDot).(func(a, b []F) F)
		axpy, _ := any(vecAxpy).(func(alpha F, x, y []F))
		if dot != nil && axpy != nil {
			return vecOps[F]{dot, axpy}
		}
	}
	return vecOps[F]{goDot[F], goAxpy[F]}
}
