package cpu

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"swerl/gpu"
)

type float interface{ ~float32 | ~float64 }

// buf is a Buf of this package: a window on host memory.
type buf[F float] struct{ d []F }

func (b *buf[F]) Len() int { return len(b.d) }

// Backend is the CPU implementation of gpu.Backend, for float32 (New) or
// float64 (NewFloat64) storage. It is not safe for concurrent use; one op
// at a time uses all workers.
type Backend[F float] struct {
	name string
	pool *pool
	err  error
	// scratch holds the transposed panels of the matmul backward; it grows
	// to the largest size seen and is then reused.
	scratch []F
	// attnCols holds AttentionBackward's gathered columns; it grows like
	// scratch.
	attnCols []F
	mm       gemmJob[F]
	// vector selects the AVX2+FMA float32 matmul (sgemm.go); its state
	// and packing buffers are reused from op to op.
	vector bool
	// avx512 selects the 8-row AVX-512 kernel in MatmulPacked.
	avx512 bool
	sg     sgemmJob
	gv     gemvJob
	packA  [][]float32
	packB  []float32
	// packRows holds the rows of a MatmulPacked input in 6-row strips.
	packRows []float32
	vec      vecOps[F]
	jobs     jobs[F]
}

// New returns a float32 backend with GOMAXPROCS workers.
func New() *Backend[float32] { return newBackend[float32]("cpu", runtime.GOMAXPROCS(0)) }

// NewFloat64 returns a backend that stores and computes in float64; it is
// the reference precision for finite-difference gradient checks.
func NewFloat64() *Backend[float64] { return newBackend[float64]("cpu64", runtime.GOMAXPROCS(0)) }

// NewWorkers returns a float32 backend with a fixed worker count (>= 1).
func NewWorkers(workers int) *Backend[float32] {
	return newBackend[float32]("cpu", max(workers, 1))
}

func newBackend[F float](name string, workers int) *Backend[F] {
	b := &Backend[F]{name: name, pool: newPool(workers)}
	var zero F
	_, f32 := any(zero).(float32)
	b.vector = f32 && haveFMA
	b.avx512 = b.vector && haveAVX512
	b.vec = newVecOps[F](b.vector)
	runtime.AddCleanup(b, func(p *pool) { p.close() }, b.pool)
	return b
}

// Name implements gpu.Backend.
func (b *Backend[F]) Name() string { return b.name }

// Workers is the number of goroutines that share each op.
func (b *Backend[F]) Workers() int { return b.pool.n }

func (b *Backend[F]) fail(op string, format string, a ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("cpu: %s: %s", op, fmt.Sprintf(format, a...))
	}
}

// get unwraps x; nil stays nil. A foreign Buf records an error.
func (b *Backend[F]) get(op string, x gpu.Buf) []F {
	if x == nil {
		return nil
	}
	p, ok := x.(*buf[F])
	if !ok {
		b.fail(op, "buffer of type %T does not belong to backend %s", x, b.name)
		return nil
	}
	if p.d == nil && cap(p.d) == 0 {
		// Allocated buffers always have capacity; a nil window is a freed
		// buffer.
		b.fail(op, "use of a freed buffer")
	}
	return p.d
}

// need checks that every named buffer has at least n elements.
func (b *Backend[F]) need(op string, n int, bufs ...any) bool {
	if b.err != nil {
		return false
	}
	if n < 0 {
		b.fail(op, "negative size %d", n)
		return false
	}
	for i := 0; i+1 < len(bufs); i += 2 {
		name := bufs[i].(string)
		s := bufs[i+1].([]F)
		if len(s) < n {
			b.fail(op, "%s has %d elements, need %d", name, len(s), n)
			return false
		}
	}
	return b.err == nil
}

// Alloc implements gpu.Backend.
func (b *Backend[F]) Alloc(n int) (gpu.Buf, error) {
	if n < 0 {
		return nil, fmt.Errorf("cpu: alloc: negative size %d", n)
	}
	return &buf[F]{d: make([]F, n, max(n, 1))}, nil
}

// Slice implements gpu.Backend.
func (b *Backend[F]) Slice(x gpu.Buf, off, n int) gpu.Buf {
	d := b.get("slice", x)
	if off < 0 || n < 0 || off+n > len(d) {
		b.fail("slice", "window [%d:%d] out of range of %d elements", off, off+n, len(d))
		return &buf[F]{d: make([]F, 0, 1)}
	}
	return &buf[F]{d: d[off : off+n : off+n]}
}

// Free implements gpu.Backend.
func (b *Backend[F]) Free(x gpu.Buf) {
	if p, ok := x.(*buf[F]); ok {
		p.d = nil
	}
}

// Upload implements gpu.Backend.
func (b *Backend[F]) Upload(dst gpu.Buf, src []float32) {
	d := b.get("upload", dst)
	if !b.need("upload", len(src), "dst", d) {
		return
	}
	for i, v := range src {
		d[i] = F(v)
	}
}

// Download implements gpu.Backend.
func (b *Backend[F]) Download(dst []float32, src gpu.Buf) error {
	s := b.get("download", src)
	if !b.need("download", len(dst), "src", s) {
		return b.err
	}
	for i := range dst {
		dst[i] = float32(s[i])
	}
	return nil
}

// Err implements gpu.Backend.
func (b *Backend[F]) Err() error { return b.err }

// Wrap implements gpu.HostBacked for the float32 backend: the Buf aliases
// data. The float64 backend returns nil.
func (b *Backend[F]) Wrap(data []float32) gpu.Buf {
	d, ok := any(data).([]F)
	if !ok {
		return nil
	}
	if data == nil {
		d = make([]F, 0, 1)
	}
	return &buf[F]{d: d}
}

// Host implements gpu.HostBacked: the float32 memory of x.
func (b *Backend[F]) Host(x gpu.Buf) []float32 {
	d, _ := any(b.get("host", x)).([]float32)
	return d
}

// Data returns the memory of x in the backend's precision, for tests that
// perturb or read buffers of the float64 backend directly.
func (b *Backend[F]) Data(x gpu.Buf) []F { return b.get("data", x) }

var errClosed = errors.New("cpu: backend closed")

// Close stops the worker goroutines; the backend must not be used after.
// Backends that are garbage collected stop their workers anyway.
func (b *Backend[F]) Close() error {
	b.pool.close()
	if b.err == nil {
		b.err = errClosed
	}
	return nil
}

// ---------------------------------------------------------------------------
// worker pool

// job is one parallel op: run handles rows [lo, hi).
type job interface{ run(lo, hi int) }

// piecesPerWorker is how many pieces an op is cut into per worker. Pieces
// are claimed by whichever goroutine is free, so a worker that wakes late
// or runs slow (the cores are shared) leaves its rows to the others
// instead of holding the op up; more pieces balance better and cost one
// atomic claim each.
const piecesPerWorker = 4

// pool runs an op's pieces on the calling goroutine and n-1 workers. A
// round (one parallel call) publishes its job and size, then one word
// that packs the round number, the piece count and the next piece to
// claim; a goroutine claims a piece by advancing the word with a
// compare-and-swap, so a worker woken for an earlier round finds the word
// changed or exhausted and claims nothing it should not. The goroutine
// that completes the last piece reports it: the caller returns once every
// piece is done, without waiting for workers that never got one.
type pool struct {
	n    int
	wake chan struct{} // a worker token: look at the current round
	once sync.Once

	// The round's job, set by the caller before it publishes state and
	// cleared after the round, read by a worker only after it claimed a
	// piece of this round.
	j          job
	rows, size int
	state      atomic.Uint64 // round<<32 | pieces<<16 | next piece
	done       atomic.Uint32 // pieces completed this round
	finished   chan struct{} // a worker completed the round's last piece
	round      uint64
}

func newPool(n int) *pool {
	p := &pool{n: n, wake: make(chan struct{}, n), finished: make(chan struct{}, 1)}
	for i := 1; i < n; i++ {
		go func() {
			for range p.wake {
				p.help(false)
			}
		}()
	}
	return p
}

func (p *pool) close() { p.once.Do(func() { close(p.wake) }) }

// help claims and runs pieces of the current round until none is left.
// It reports whether the caller's goroutine completed the round's last
// piece.
func (p *pool) help(caller bool) (last bool) {
	for {
		w := p.state.Load()
		pieces, next := w>>16&0xffff, w&0xffff
		if next >= pieces {
			return last
		}
		if !p.state.CompareAndSwap(w, w+1) {
			continue // another goroutine claimed it, or a new round began
		}
		lo := int(next) * p.size
		p.j.run(lo, min(lo+p.size, p.rows))
		if p.done.Add(1) == uint32(pieces) {
			if !caller {
				p.finished <- struct{}{}
			}
			last = true
		}
	}
}

// parallel runs j over [0, n) cut into contiguous pieces of at least
// grain rows (aligned to align rows), at most piecesPerWorker a worker,
// on the caller and the pool's workers. The cut depends only on n,
// grain, align and p.n, never on which goroutine runs a piece.
func (p *pool) parallel(j job, n, grain, align int) {
	if n <= 0 {
		return
	}
	pieces := 1
	if p.n > 1 {
		pieces = min(p.n*piecesPerWorker, 0xffff, max(1, n/max(grain, 1)))
	}
	if pieces <= 1 {
		j.run(0, n)
		return
	}
	size := (n + pieces - 1) / pieces
	size = (size + align - 1) / align * align
	pieces = (n + size - 1) / size
	p.j, p.rows, p.size = j, n, size
	p.done.Store(0)
	p.round++
	p.state.Store(p.round<<32 | uint64(pieces)<<16)
	for range min(p.n, pieces) - 1 {
		select {
		case p.wake <- struct{}{}:
		default: // every worker already holds a token
		}
	}
	if !p.help(true) {
		<-p.finished
	}
	p.j = nil
}

func sqrt[F float](x F) F { return F(math.Sqrt(float64(x))) }
func exp[F float](x F) F  { return F(math.Exp(float64(x))) }
