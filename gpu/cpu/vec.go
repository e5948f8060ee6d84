package cpu

// Vector primitives of the row ops (attention, SwiGLU): dot products and
// y += alpha*x over m rows of a strided matrix in one call (dots, axpys),
// and the exponentials of the softmax and of SwiGLU. The float32 backend on AVX2+FMA points them at the assembly
// kernels; everything else uses the Go loops, which sum in index order
// and take math.Exp.
type vecOps[F float] struct {
	// dots sets out[j] = dot(q, k[j*stride:][:len(q)]) for j < len(out).
	dots func(q, k []F, stride int, out []F)
	// axpys adds alpha[j]*x[j*stride:][:len(y)] to y for j < len(alpha), in order.
	axpys func(alpha, x []F, stride int, y []F)
	// expSub sets y[i] = exp(x[i]-sub) for i < len(x); y may be x.
	expSub func(x []F, sub F, y []F)
	// swiglu sets o[i] = g[i]/(1+exp(-g[i]))*u[i] for i < len(o).
	swiglu func(o, g, u []F)
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

// vecExpSub runs sexpsub over the multiple of 8 and once more over the
// tail, copied into a zero-padded vector.
func vecExpSub(x []float32, sub float32, y []float32) {
	y = y[:len(x)]
	n := len(x) &^ 7
	if n > 0 {
		sexpsub(n, &x[0], sub, &y[0])
	}
	if n < len(x) {
		var t [8]float32
		copy(t[:], x[n:])
		sexpsub(8, &t[0], sub, &t[0])
		copy(y[n:], t[:])
	}
}

// vecSwiGLU runs sswiglu over the multiple of 8 and once more over the
// tail, copied into zero-padded vectors.
func vecSwiGLU(o, g, u []float32) {
	g, u = g[:len(o)], u[:len(o)]
	n := len(o) &^ 7
	if n > 0 {
		sswiglu(n, &g[0], &u[0], &o[0])
	}
	if n < len(o) {
		var tg, tu [8]float32
		copy(tg[:], g[n:])
		copy(tu[:], u[n:])
		sswiglu(8, &tg[0], &tu[0], &tg[0])
		copy(o[n:], tg[:])
	}
}

func goExpSub[F float](x []F, sub F, y []F) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] = exp(v - sub)
	}
}

func goSwiGLU[F float](o, g, u []F) {
	g, u = g[:len(o)], u[:len(o)]
	for i, x := range g {
		o[i] = x / (1 + exp(-x)) * u[i]
	}
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
		dots, _ := any(vecDots).(func(q, k []F, stride int, out []F))
		axpys, _ := any(vecAxpys).(func(alpha, x []F, stride int, y []F))
		expSub, _ := any(vecExpSub).(func(x []F, sub F, y []F))
		swiglu, _ := any(vecSwiGLU).(func(o, g, u []F))
		if dots != nil && axpys != nil && expSub != nil && swiglu != nil {
			return vecOps[F]{dots, axpys, expSub, swiglu}
		}
	}
	return vecOps[F]{goDots[F], goAxpys[F], goExpSub[F], goSwiGLU[F]}
}
