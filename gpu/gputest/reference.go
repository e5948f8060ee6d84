package gputest

import "math"

// The float64 reference forward ops, written as plainly as possible.

func refMatmul(inp, w, bias []float64, N, C, OC int) []float64 {
	out := make([]float64, N*OC)
	for n := range N {
		for o := range OC {
			var s float64
			if bias != nil {
				s = bias[o]
			}
			for c := range C {
				s += inp[n*C+c] * w[o*C+c]
			}
			out[n*OC+o] = s
		}
	}
	return out
}

func refRMSNorm(inp, w []float64, N, C int, eps float64) (out, rstd []float64) {
	out, rstd = make([]float64, N*C), make([]float64, N)
	for n := range N {
		var ms float64
		for c := range C {
			ms += inp[n*C+c] * inp[n*C+c]
		}
		rstd[n] = 1 / math.Sqrt(ms/float64(C)+eps)
		for c := range C {
			out[n*C+c] = inp[n*C+c] * rstd[n] * w[c]
		}
	}
	return out, rstd
}

func refRoPE(x, cos, sin []float64, B, T, NH, HS, pos0 int) []float64 {
	out := make([]float64, len(x))
	half := HS / 2
	for b := range B {
		for t := range T {
			p := pos0 + t
			for h := range NH {
				base := ((b*T+t)*NH + h) * HS
				for i := range half {
					c, s := cos[p*half+i], sin[p*half+i]
					x1, x2 := x[base+i], x[base+i+half]
					out[base+i] = x1*c - x2*s
					out[base+i+half] = x2*c + x1*s
				}
			}
		}
	}
	return out
}

func refAttention(q, k, v []float64, B, Tq, Tk, NH, NKV, HS int) (out, att []float64) {
	out, att = make([]float64, B*Tq*NH*HS), make([]float64, B*NH*Tq*Tk)
	for b := range B {
		for h := range NH {
			kh := h / (NH / NKV)
			for i := range Tq {
				pos := Tk - Tq + i
				scores := make([]float64, pos+1)
				mx := math.Inf(-1)
				for j := 0; j <= pos; j++ {
					var s float64
					for c := range HS {
						s += q[((b*Tq+i)*NH+h)*HS+c] * k[((b*Tk+j)*NKV+kh)*HS+c]
					}
					scores[j] = s / math.Sqrt(float64(HS))
					mx = math.Max(mx, scores[j])
				}
				var sum float64
				for j := range scores {
					scores[j] = math.Exp(scores[j] - mx)
					sum += scores[j]
				}
				for j := range scores {
					p := scores[j] / sum
					att[((b*NH+h)*Tq+i)*Tk+j] = p
					for c := range HS {
						out[((b*Tq+i)*NH+h)*HS+c] += p * v[((b*Tk+j)*NKV+kh)*HS+c]
					}
				}
			}
		}
	}
	return out, att
}

func refSwiGLU(gate, up []float64) []float64 {
	out := make([]float64, len(gate))
	for i, g := range gate {
		out[i] = g / (1 + math.Exp(-g)) * up[i]
	}
	return out
}

func refLogProb(logits []float64, targets []int32, V int) (logp, lse []float64) {
	N := len(targets)
	logp, lse = make([]float64, N), make([]float64, N)
	for n := range N {
		mx := math.Inf(-1)
		for v := range V {
			mx = math.Max(mx, logits[n*V+v])
		}
		var s float64
		for v := range V {
			s += math.Exp(logits[n*V+v] - mx)
		}
		lse[n] = mx + math.Log(s)
		logp[n] = logits[n*V+int(targets[n])] - lse[n]
	}
	return logp, lse
}

func refAdamW(p, g, m, v []float64, lr, b1, b2, eps, wd, gs float64, step int) {
	for i := range p {
		gr := g[i] * gs
		m[i] = b1*m[i] + (1-b1)*gr
		v[i] = b2*v[i] + (1-b2)*gr*gr
		mh := m[i] / (1 - math.Pow(b1, float64(step)))
		vh := v[i] / (1 - math.Pow(b2, float64(step)))
		p[i] -= lr * (mh/(math.Sqrt(vh)+eps) + wd*p[i])
	}
}
