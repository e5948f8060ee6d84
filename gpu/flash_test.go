package gpu_test

import (
	"math"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/gpu/gputest"
)

// flashCPU is the CPU backend with gpu.FlashAttention written directly
// over its host memory (rows, not tiles): a second implementation of the
// contract, so the gputest flash checks and the Trainer's flash path (the
// [B,NH,T] buffers, the backward's arguments) run here without a GPU.
type flashCPU struct{ *cpu.Backend[float32] }

func (flashCPU) FlashSupported(NH, NKV, HS int) bool { return NKV > 0 && NH%NKV == 0 && HS > 0 }

// scores fills s[0..i] with row i's scaled scores of head h.
func flashScores(s []float64, q, k []float32, b, i, h, T, NH, NKV, HS int) {
	kh := h / (NH / NKV)
	for j := 0; j <= i; j++ {
		var d float64
		for c := range HS {
			d += float64(q[((b*T+i)*NH+h)*HS+c]) * float64(k[((b*T+j)*NKV+kh)*HS+c])
		}
		s[j] = d / math.Sqrt(float64(HS))
	}
}

func (f flashCPU) AttentionForwardLSE(out, lse, q, k, v gpu.Buf, B, T, NH, NKV, HS int) {
	o, l, qh, kh, vh := f.Host(out), f.Host(lse), f.Host(q), f.Host(k), f.Host(v)
	s := make([]float64, T)
	for b := range B {
		for h := range NH {
			g := h / (NH / NKV)
			for i := range T {
				flashScores(s, qh, kh, b, i, h, T, NH, NKV, HS)
				mx := math.Inf(-1)
				for _, x := range s[:i+1] {
					mx = math.Max(mx, x)
				}
				var sum float64
				for _, x := range s[:i+1] {
					sum += math.Exp(x - mx)
				}
				ls := mx + math.Log(sum)
				l[(b*NH+h)*T+i] = float32(ls)
				for c := range HS {
					var acc float64
					for j := 0; j <= i; j++ {
						acc += math.Exp(s[j]-ls) * float64(vh[((b*T+j)*NKV+g)*HS+c])
					}
					o[((b*T+i)*NH+h)*HS+c] = float32(acc)
				}
			}
		}
	}
}

func (f flashCPU) AttentionBackwardLSE(dq, dk, dv, delta, dout, out, q, k, v, lse gpu.Buf, B, T, NH, NKV, HS int) {
	do, o, qh, kh, vh, l, dl := f.Host(dout), f.Host(out), f.Host(q), f.Host(k), f.Host(v), f.Host(lse), f.Host(delta)
	var dqh, dkh, dvh []float32
	if dq != nil {
		dqh = f.Host(dq)
	}
	if dk != nil {
		dkh = f.Host(dk)
	}
	if dv != nil {
		dvh = f.Host(dv)
	}
	scale := 1 / math.Sqrt(float64(HS))
	s := make([]float64, T)
	for b := range B {
		for h := range NH {
			g := h / (NH / NKV)
			for i := range T {
				row := ((b*T+i)*NH + h) * HS
				var D float64
				for c := range HS {
					D += float64(do[row+c]) * float64(o[row+c])
				}
				dl[(b*NH+h)*T+i] = float32(D)
				flashScores(s, qh, kh, b, i, h, T, NH, NKV, HS)
				for j := 0; j <= i; j++ {
					kv := ((b*T+j)*NKV + g) * HS
					p := math.Exp(s[j] - float64(l[(b*NH+h)*T+i]))
					var dp float64
					for c := range HS {
						dp += float64(do[row+c]) * float64(vh[kv+c])
					}
					ds := p * (dp - D) * scale
					for c := range HS {
						if dvh != nil {
							dvh[kv+c] += float32(p * float64(do[row+c]))
						}
						if dkh != nil {
							dkh[kv+c] += float32(ds * float64(qh[row+c]))
						}
						if dqh != nil {
							dqh[row+c] += float32(ds * float64(kh[kv+c]))
						}
					}
				}
			}
		}
	}
}

func TestFlashContract(t *testing.T) {
	be := flashCPU{cpu.New()}
	defer be.Close()
	gputest.TestBackend(t, be)
}

// TestFlashTrainer: a Trainer over a FlashAttention backend (log-sum-exps
// in place of the probabilities) takes the steps the plain one takes.
func TestFlashTrainer(t *testing.T) {
	run := func(be gpu.Backend) ([]float32, []float64) {
		m, _ := gpu.NewModel(gpu.TinyConfig(), 3)
		tr, err := gpu.NewTrainer(m, be, gpu.TrainConfig{MaxBatch: 2, MaxSeq: 16, LR: 1e-3})
		if err != nil {
			t.Fatal(err)
		}
		var losses []float64
		for i := range 3 {
			b := []gpu.Sequence{
				{Prompt: []int32{1, 2, 3}, Completion: []int32{4, 5, int32(6 + i)}, Advantage: 1},
				{Prompt: []int32{7, 8}, Completion: []int32{9, 10, 11, 12, 13, 14}, Advantage: -0.5},
			}
			met, err := tr.Step(b)
			if err != nil {
				t.Fatal(err)
			}
			losses = append(losses, met.Loss)
		}
		var all []float32
		for _, x := range m.Tensors() {
			all = append(all, x.Data...)
		}
		return all, losses
	}
	plain := cpu.New()
	defer plain.Close()
	fl := flashCPU{cpu.New()}
	defer fl.Close()
	want, wl := run(plain)
	got, gl := run(fl)
	for i := range wl {
		if math.Abs(gl[i]-wl[i]) > 1e-5*math.Max(1, math.Abs(wl[i])) {
			t.Fatalf("step %d loss %v with flash attention, %v without", i, gl[i], wl[i])
		}
	}
	var worst float64
	for i := range want {
		worst = max(worst, math.Abs(float64(got[i]-want[i])))
	}
	if worst > 1e-5 {
		t.Fatalf("weights differ by up to %g after 3 steps", worst)
	}
}
