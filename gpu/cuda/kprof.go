//go:build cuda

package cuda

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"gorgonia.org/cu"
)

// kernelProf times every kernel launch, cuBLAS call and device memory
// operation on the GPU's own clock (SWERL_CUDA_PROFILE=kernels): an event
// is recorded on the stream before and after each, and nothing waits
// between them, so the ops overlap the host as they do unprofiled. A span
// can include time the GPU spent idle waiting for the host to enqueue the
// work its start event precedes, which is why the table also prints the
// GPU's busy share of the wall clock.
type kernelProf struct {
	free    []cu.Event
	pending []span
	rows    map[string]*kstat
	since   time.Time // wall clock of the last reset
}

type span struct {
	name  string
	flops float64
	a, b  cu.Event
}

type kstat struct {
	calls int
	ms    float64
	flops float64
}

// maxPending bounds the spans held before their times are read back.
const maxPending = 8192

func newKernelProf() *kernelProf {
	return &kernelProf{rows: map[string]*kstat{}, since: time.Now()}
}

// event takes an event from the pool or makes one (driver thread).
func (kp *kernelProf) event() (cu.Event, error) {
	if n := len(kp.free); n > 0 {
		e := kp.free[n-1]
		kp.free = kp.free[:n-1]
		return e, nil
	}
	return cu.MakeEvent(cu.DefaultEvent)
}

// begin records a start event when kernel profiling is on; end records
// the span's end and charges it to name (with flops for the TFLOP/s
// column of matrix products). Both run on the driver thread.
func (be *Backend) begin() cu.Event {
	if be.kprof == nil {
		return cu.Event{}
	}
	e, err := be.kprof.event()
	if err == nil {
		err = e.Record(cu.Stream{})
	}
	if err != nil {
		be.fail("profile", "event: %v", err)
		return cu.Event{}
	}
	return e
}

func (be *Backend) end(a cu.Event, name string, flops float64) {
	kp := be.kprof
	if kp == nil || a == (cu.Event{}) {
		return
	}
	e, err := kp.event()
	if err == nil {
		err = e.Record(cu.Stream{})
	}
	if err != nil {
		be.fail("profile", "event: %v", err)
		return
	}
	kp.pending = append(kp.pending, span{name: name, flops: flops, a: a, b: e})
	if len(kp.pending) >= maxPending {
		be.flushProfile()
	}
}

// flushProfile waits for the pending spans and adds their times to the
// table (driver thread).
func (be *Backend) flushProfile() {
	kp := be.kprof
	if kp == nil || len(kp.pending) == 0 {
		return
	}
	if err := kp.pending[len(kp.pending)-1].b.Synchronize(); err != nil {
		be.fail("profile", "synchronize: %v", err)
		return
	}
	for _, s := range kp.pending {
		ms, err := s.a.Elapsed(s.b)
		if err != nil {
			be.fail("profile", "elapsed %s: %v", s.name, err)
			return
		}
		r := kp.rows[s.name]
		if r == nil {
			r = &kstat{}
			kp.rows[s.name] = r
		}
		r.calls++
		r.ms += ms
		r.flops += s.flops
		kp.free = append(kp.free, s.a, s.b)
	}
	kp.pending = kp.pending[:0]
}

// ResetProfile clears what either profile (SWERL_CUDA_PROFILE=1 or
// =kernels) has gathered, so a benchmark can start it after its warm-up.
func (be *Backend) ResetProfile() {
	be.do(func() {
		be.flushProfile()
		if be.kprof != nil {
			clear(be.kprof.rows)
			be.kprof.since = time.Now()
		}
	})
	if be.prof != nil {
		clear(be.prof)
	}
}

// KernelProfile is the SWERL_CUDA_PROFILE=kernels table since the last
// reset, per step of steps: GPU milliseconds and calls per kernel, cuBLAS
// call (named by shape) and memory operation, TFLOP/s for the matrix
// products, and the GPU's busy share of the wall clock. "" when off.
func (be *Backend) KernelProfile(steps int) string {
	if be.kprof == nil {
		return ""
	}
	var b strings.Builder
	be.do(func() {
		_ = cu.Synchronize()
		be.flushProfile()
		kp := be.kprof
		wall := time.Since(kp.since).Seconds() * 1e3
		type row struct {
			name string
			kstat
		}
		var rows []row
		var busy float64
		for n, r := range kp.rows {
			rows = append(rows, row{n, *r})
			busy += r.ms
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].ms > rows[j].ms })
		s := float64(max(steps, 1))
		fmt.Fprintf(&b, "per step of %d: wall %.2f ms, GPU busy %.2f ms (%.0f%%)\n", steps, wall/s, busy/s, 100*busy/max(wall, 1e-9))
		fmt.Fprintf(&b, "%-52s %9s %7s %6s %8s\n", "kernel", "ms/step", "calls", "%busy", "TFLOP/s")
		for _, r := range rows {
			tf := ""
			if r.flops > 0 {
				tf = fmt.Sprintf("%.1f", r.flops/(r.ms*1e-3)/1e12)
			}
			fmt.Fprintf(&b, "%-52s %9.3f %7.1f %6.1f %8s\n", r.name, r.ms/s, float64(r.calls)/s, 100*r.ms/max(busy, 1e-9), tf)
		}
	})
	return b.String()
}

// endGemm ends a span of batch cuBLAS products of one shape, named by
// kind, transposes and m×n×k so each layer shape is a row of its own.
func (be *Backend) endGemm(a cu.Event, kind string, ta, tb, m, n, k, batch int) {
	if be.kprof == nil {
		return
	}
	tr := [2]string{"N", "T"}
	name := fmt.Sprintf("%s %s%s %dx%dx%d", kind, tr[ta], tr[tb], m, n, k)
	if batch > 1 {
		name += fmt.Sprintf(" x%d", batch)
	}
	be.end(a, name, 2*float64(m)*float64(n)*float64(k)*float64(batch))
}
