//go:build cuda

package cuda

import (
	"gorgonia.org/cu"

	"swerl/gpu"
)

// pendZero is the range [lo, hi) of allocation a that Zero left for the
// next op touching it (lazy zeroing, the default; SWERL_CUDA_ZERO=now
// turns it off).
type pendZero struct {
	a      *alloc
	lo, hi int
}

// Zero implements gpu.Backend. With lazy zeroing it records the range,
// merged with any pending range it overlaps or touches, so that pending
// ranges stay disjoint.
func (be *Backend) Zero(x gpu.Buf) {
	d := be.grad16("zero", x)
	if be.error() != nil || d == nil || d.n == 0 {
		return
	}
	if !be.lazy {
		be.postZero(pendZero{d.a, d.off, d.off + d.n})
		return
	}
	z := pendZero{d.a, d.off, d.off + d.n}
	kept := be.pend[:0]
	for _, p := range be.pend {
		if p.a == z.a && p.lo <= z.hi && z.lo <= p.hi {
			z.lo, z.hi = min(z.lo, p.lo), max(z.hi, p.hi)
			continue
		}
		kept = append(kept, p)
	}
	be.pend = append(kept, z)
}

// postZero queues the memset of p.
func (be *Backend) postZero(p pendZero) {
	be.post(func() {
		be.wrote(&buf{a: p.a})
		t := be.begin()
		var err error
		if p.a.only16 { // a bf16 gradient (grad16): bf16 zero is 0x0000
			err = cu.MemsetD16(p.a.half+cu.DevicePtr(2*p.lo), 0, int64(p.hi-p.lo))
		} else {
			err = cu.MemsetD32(p.a.ptr+cu.DevicePtr(4*p.lo), 0, int64(p.hi-p.lo))
		}
		if err != nil {
			be.fail("zero", "%v", err)
		}
		be.end(t, "memset", 0)
	})
}

// settle zeroes, before the op about to be queued, every pending range
// that overlaps b's window.
func (be *Backend) settle(b *buf) {
	if b == nil || len(be.pend) == 0 {
		return
	}
	kept := be.pend[:0]
	for _, p := range be.pend {
		if p.a == b.a && p.lo < b.off+b.n && b.off < p.hi {
			be.postZero(p)
			continue
		}
		kept = append(kept, p)
	}
	be.pend = kept
}

// take reports whether the first n elements of b's window lie in one
// pending range, which then gives them up: the op about to be queued
// writes them whole and starts from zero instead of adding to what is
// there. Otherwise the ranges overlapping b are settled and the op adds
// as usual.
func (be *Backend) take(b *buf, n int) bool {
	lo, hi := b.off, b.off+n
	for i, p := range be.pend {
		if p.a != b.a || p.lo > lo || hi > p.hi {
			continue
		}
		rest := be.pend[:i:i]
		if p.lo < lo {
			rest = append(rest, pendZero{p.a, p.lo, lo})
		}
		if hi < p.hi {
			rest = append(rest, pendZero{p.a, hi, p.hi})
		}
		be.pend = append(rest, be.pend[i+1:]...)
		return true
	}
	be.settle(b)
	return false
}

// forget drops the pending ranges of a freed allocation.
func (be *Backend) forget(a *alloc) {
	kept := be.pend[:0]
	for _, p := range be.pend {
		if p.a != a {
			kept = append(kept, p)
		}
	}
	be.pend = kept
}
