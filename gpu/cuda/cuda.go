//go:build cuda

package cuda

import (
	_ "embed"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"swerl/gpu"
)

// ptx is kernels.cu compiled for compute_80: the driver JIT-compiles it for
// the card at load, sm_90 (H100, H200) included.
//
//go:generate ../../scripts/cuda-ptx.sh
//go:embed kernels.ptx
var ptx string

const block = 256 // threads per block of every kernel

// alloc is one device allocation.
type alloc struct {
	ptr   cu.DevicePtr
	n     int
	freed bool
	// keep16 marks weights with a bf16 copy for the bf16 matmuls
	// (KeepBF16): half holds it once made, halfOK while it equals the
	// float32 values. Driver thread only.
	keep16 bool
	half   cu.DevicePtr
	halfOK bool
	// only16 marks buffers held in bf16 only: ptr is 0 and half holds
	// the values. Frozen weights (UploadFrozen) are read only as matmul
	// weights and embedding tables; activations (act, AllocBF16) are
	// written by RMSNormForward and SwiGLUForward and read only as matmul
	// inputs.
	only16, act bool
}

// buf is a Buf of this package: a window [off, off+n) of an allocation.
type buf struct {
	a      *alloc
	off, n int
}

func (b *buf) Len() int {
	if b == nil {
		return 0 // get's answer to a refused buffer, after it failed the op
	}
	return b.n
}

func (b *buf) ptr() cu.DevicePtr { return b.a.ptr + cu.DevicePtr(4*b.off) }

// Backend is the CUDA implementation of gpu.Backend: float32 buffers in
// device memory, kernels from kernels.cu, matmuls through cuBLAS. Every
// driver call runs on one goroutine locked to its OS thread, which holds
// the CUDA context; ops are sent to it as closures and launch
// asynchronously on the default stream. Not safe for concurrent use.
type Backend struct {
	q      chan func()
	done   chan struct{}
	mu     sync.Mutex // guards err, which the driver thread also sets
	err    error
	name   string // the card, e.g. "NVIDIA H100 80GB HBM3"
	cc     int    // compute capability, e.g. 90
	ctx    cu.CUContext
	fns    map[string]cu.Function
	blas   *blas
	toks   *buf // device copy of the last token/target ids (int32)
	acc    *buf // 2 words: the float64 accumulator of SumSquares
	blocks int  // grid size cap for grid-stride kernels
	// attn is the training attention: "cublas" (the default in the f32
	// and tf32 matmul modes, and the exact float32 reference the tests
	// compare the others against: cuBLAS batched products, one call per
	// product over every (b, head), and a softmax kernel over the
	// [B,NH,T,T] matrix), "mma" (the default in bf16: gpu.FlashAttention
	// on mma.sync with the softmax in registers, flash_mma.cuh) or "pipe"
	// (mma with the forward's and dq's K and V tiles double-buffered by
	// cp.async for bf16 heads up to 64, and dq's pending zero taken before
	// dk's and dv's settle; opt-in until it has run on a card);
	// SWERL_CUDA_ATTN picks it. In every mode AttentionForward and
	// AttentionBackward over up to perRowTq query rows (decoding) run the
	// one-block-per-row kernels.
	attn string
	// attnSet: SetAttention chose attn; otherwise SetMatmul does.
	attnSet  bool
	flashTmp *buf     // scratch of a flash backward asked for only one of dk, dv
	gqaTmp   *buf     // per-query-head dK or dV of the cuBLAS attention backward
	pickBuf  *buf     // PickGreedy's tokens and log-probs
	half16   [2]alloc // bf16 operand scratch of the bf16 matmul mode
	// ops counts the ops run on the driver thread; halfOf records what
	// each bf16 scratch slot holds and mm the last matrix product op's
	// outputs, so that consecutive products of one input (q, k and v of
	// a layer; gate and up) convert it once (see half).
	ops    uint64
	halfOf [2]halfMemo
	mm     mmOutputs
	ints   map[string]*intSlot     // device copies of the ragged ops' row indices
	ptrs   map[string]cu.DevicePtr // attention's cuBLAS pointer arrays, by content
	// act16: AllocBF16 gives bf16-only activations in the bf16 matmul
	// mode (the default; SWERL_CUDA_ACT=f32 turns it off); otherwise
	// float32 buffers.
	act16 bool
	// lazy (the default; SWERL_CUDA_ZERO=now turns it off): Zero records its range in pend
	// instead of zeroing it; the next op that touches the range zeroes it
	// first (settle), unless it writes the range whole and can take the
	// zero as its starting point (take: a product with beta 0, an
	// accumulating kernel that writes instead of adding). Caller side,
	// like the ops' checks; pending ranges never overlap.
	lazy bool
	pend []pendZero
	// fuse (the default; SWERL_CUDA_FUSE=0 turns it off): AddRMSNormForward
	// is one kernel instead of Add and RMSNormForward, decoding adds the
	// q, k and v biases in rope_kv_rows, and the MLP's gate and up
	// projections are one product (gpu.PairedSwiGLU).
	fuse bool
	// prof accumulates per-op time when SWERL_CUDA_PROFILE=1.
	prof map[string]time.Duration
	// kprof times each kernel on the GPU when SWERL_CUDA_PROFILE=kernels.
	kprof *kernelProf
}

var _ gpu.Backend = (*Backend)(nil)

// New opens device 0 with the given options (see Options; cmd/swerl reads
// them from the SWERL_CUDA_* environment variables).
func New(o Options) (*Backend, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	be := &Backend{q: make(chan func(), 4096), done: make(chan struct{}), fns: map[string]cu.Function{}}
	started := make(chan error)
	go be.loop(started)
	if err := <-started; err != nil {
		return nil, err
	}
	be.attn = "cublas"
	if o.Attention != "" {
		if err := be.SetAttention(o.Attention); err != nil {
			be.Close()
			return nil, err
		}
	}
	be.lazy, be.fuse, be.act16 = !o.EagerZero, !o.NoFuse, !o.F32Activations
	switch o.Profile {
	case "ops":
		be.prof = map[string]time.Duration{}
	case "kernels":
		be.kprof = newKernelProf()
	}
	if o.Matmul != "" {
		if err := be.SetMatmul(o.Matmul); err != nil {
			be.Close()
			return nil, err
		}
	}
	return be, nil
}

// loop is the driver thread.
func (be *Backend) loop(started chan<- error) {
	runtime.LockOSThread()
	defer close(be.done)
	if err := be.init(); err != nil {
		started <- err
		return
	}
	started <- nil
	for f := range be.q {
		f()
	}
	// Destroying the context frees every allocation of this backend.
	_ = cu.Synchronize()
	_ = be.ctx.Destroy()
}

func (be *Backend) init() error {
	n, err := cu.NumDevices()
	if err != nil || n == 0 {
		return fmt.Errorf("cuda: no device (%d devices, %v)", n, err)
	}
	dev, err := cu.GetDevice(0)
	if err != nil {
		return fmt.Errorf("cuda: device 0: %w", err)
	}
	if be.name, err = dev.Name(); err != nil {
		return fmt.Errorf("cuda: device name: %w", err)
	}
	maj, err1 := dev.Attribute(cu.ComputeCapabilityMajor)
	min, err2 := dev.Attribute(cu.ComputeCapabilityMinor)
	sms, err3 := dev.Attribute(cu.MultiprocessorCount)
	if err1 != nil || err2 != nil || err3 != nil {
		return fmt.Errorf("cuda: device attributes: %v %v %v", err1, err2, err3)
	}
	be.cc = maj*10 + min
	be.blocks = sms * 32
	if be.ctx, err = dev.MakeContext(cu.SchedAuto); err != nil {
		return fmt.Errorf("cuda: context: %w", err)
	}
	if be.cc < 80 {
		return fmt.Errorf("cuda: %s has compute capability %d.%d; the kernels need 8.0 or later", be.name, maj, min)
	}
	mod, err := cu.LoadData(ptx)
	if err != nil {
		return fmt.Errorf("cuda: loading kernels (compute_80 PTX on sm_%d): %w", be.cc, err)
	}
	for _, line := range strings.Split(ptx, "\n") {
		// ".visible .entry add_f32(" names each kernel.
		if i := strings.Index(line, ".entry "); i >= 0 {
			name := strings.TrimSpace(line[i+len(".entry "):])
			name = strings.TrimSuffix(name, "(")
			if be.fns[name], err = mod.Function(name); err != nil {
				return fmt.Errorf("cuda: kernel %s: %w", name, err)
			}
		}
	}
	if be.blas, err = newBlas(); err != nil {
		return err
	}
	a, err := be.alloc(2)
	if err != nil {
		return err
	}
	be.acc = a
	return nil
}

// post queues f for the driver thread without waiting: ops that return
// nothing. Host memory f reads must be the op's own copy.
func (be *Backend) post(f func()) {
	if be.prof != nil {
		be.timed(f)
		return
	}
	be.q <- func() { be.ops++; f() }
}

// do runs f on the driver thread and waits for it (and everything queued
// before it).
func (be *Backend) do(f func()) {
	if be.prof != nil {
		be.timed(f)
		return
	}
	ch := make(chan struct{})
	be.q <- func() { be.ops++; f(); close(ch) }
	<-ch
}

// timed runs f synchronously and charges its time to the op that called
// post or do.
func (be *Backend) timed(f func()) {
	ch := make(chan struct{})
	pc, _, _, _ := runtime.Caller(2)
	name := runtime.FuncForPC(pc).Name()
	name = name[strings.LastIndex(name, ".")+1:]
	start := time.Now()
	be.q <- func() { be.ops++; f(); _ = cu.Synchronize(); close(ch) }
	<-ch
	be.prof[name] += time.Since(start)
}

// Profile returns the wall time spent per op (each op synchronized) since
// New when SWERL_CUDA_PROFILE=1, as a table sorted by time; "" otherwise.
func (be *Backend) Profile() string {
	if be.prof == nil {
		return ""
	}
	type row struct {
		op string
		d  time.Duration
	}
	var rows []row
	var total time.Duration
	for op, d := range be.prof {
		rows = append(rows, row{op, d})
		total += d
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].d > rows[j].d })
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%-22s %10.1f ms %5.1f%%\n", r.op, float64(r.d)/1e6, 100*float64(r.d)/float64(total))
	}
	return b.String()
}

// Name implements gpu.Backend.
func (be *Backend) Name() string { return "cuda" }

// Device is the card's name as the driver reports it.
func (be *Backend) Device() string { return be.name }

// ComputeCapability is the card's compute capability times ten (90 for Hopper).
func (be *Backend) ComputeCapability() int { return be.cc }

// SetMatmul selects the precision of matrix products: "f32" (exact
// float32, the default), "tf32" (tf32 tensor cores) or "bf16": the
// operands of the linear layers are converted to bf16 buffers and
// multiplied on bf16 tensor cores with float32 accumulation and output;
// attention's products use CUBLAS_COMPUTE_32F_FAST_16BF on the float32
// buffers. Storage stays float32 in every mode.
func (be *Backend) SetMatmul(mode string) error {
	c := map[string]int{"f32": computeF32, "tf32": computeFastTF, "bf16": computeFastBF}[mode]
	if c == 0 {
		return fmt.Errorf("cuda: matmul precision %q: want f32, tf32 or bf16", mode)
	}
	be.do(func() {
		be.blas.compute = c
		if !be.attnSet {
			be.attn = "cublas"
			if c == computeFastBF {
				be.attn = "mma"
			}
		}
	})
	return nil
}

// SetAttention selects the training attention: "cublas", "mma" or
// "pipe"; see the attn field. SWERL_CUDA_ATTN sets it at New. Until it is
// set, the matmul mode picks: mma in bf16 (flash_mma.cuh rounds its
// operands to bf16), cublas in f32 and tf32.
func (be *Backend) SetAttention(mode string) error {
	if want := attentionWant(mode); want != "" {
		return fmt.Errorf("cuda: attention %q: %s", mode, want)
	}
	be.do(func() { be.attn, be.attnSet = mode, true })
	return nil
}

// halfMemo is what a bf16 scratch slot holds: n floats of src as the
// driver thread's op number op converted them (or last used them).
type halfMemo struct {
	src cu.DevicePtr
	n   int
	op  uint64
}

// mmOutputs are the device ranges [lo, hi) a matrix product op wrote, and
// the op's number.
type mmOutputs struct {
	op     uint64
	ranges [3][2]cu.DevicePtr
}

// wroteProducts records, at the end of a matrix product op, the buffers
// it wrote (nil ones skipped), for half's reuse check (driver thread).
func (be *Backend) wroteProducts(outs ...*buf) {
	be.mm = mmOutputs{op: be.ops}
	for i, o := range outs {
		if o != nil && i < len(be.mm.ranges) {
			be.mm.ranges[i] = [2]cu.DevicePtr{o.ptr(), o.ptr() + cu.DevicePtr(4*o.n)}
		}
	}
}

// half converts n floats at src into bf16 scratch slot (0 or 1), growing
// it, and returns its address (driver thread). The conversion is skipped
// when the slot already holds them: converted (or reused) by the op just
// before this one, which was a matrix product that wrote nothing in
// [src, src+4n).
func (be *Backend) half(slot int, src cu.DevicePtr, n int) cu.DevicePtr {
	if be.error() != nil {
		return 0
	}
	m := &be.halfOf[slot]
	if m.src == src && m.n == n && m.op+1 == be.ops && be.mm.op == m.op && be.half16[slot].n >= n {
		fresh := true
		for _, r := range be.mm.ranges {
			if r[0] < src+cu.DevicePtr(4*n) && src < r[1] {
				fresh = false
			}
		}
		if fresh {
			m.op = be.ops
			return be.half16[slot].ptr
		}
	}
	if be.half16[slot].n < n {
		if be.half16[slot].ptr != 0 {
			_ = cu.MemFree(be.half16[slot].ptr)
		}
		p, err := cu.MemAlloc(int64(2 * n))
		if err != nil {
			be.fail("bf16 scratch", "alloc %d: %v", n, err)
			be.half16[slot] = alloc{}
			return 0
		}
		be.half16[slot] = alloc{ptr: p, n: n}
	}
	be.launch("f32_to_bf16", be.gridFor(n), be.half16[slot].ptr, src, int64(n))
	*m = halfMemo{src: src, n: n, op: be.ops}
	return be.half16[slot].ptr
}

// gemm is one column-major product of float32 buffers in the f32 or tf32
// mode (driver thread); the bf16 mode's products go through gemm16.
func (be *Backend) gemm(op string, ta, tb, m, n, k int, A cu.DevicePtr, lda int, B cu.DevicePtr, ldb int, beta float32, Cp cu.DevicePtr, ldc int) {
	if be.error() != nil {
		return
	}
	t := be.begin()
	err := be.blas.gemm(ta, tb, m, n, k, 1, A, lda, B, ldb, beta, Cp, ldc)
	be.endGemm(t, "gemm f32", ta, tb, m, n, k, 1)
	if err != nil {
		be.fail(op, "%v", err)
	}
}

// gemm16 is one column-major product of bf16 operands into float32 C
// (driver thread); a zero operand means its conversion failed.
func (be *Backend) gemm16(op string, ta, tb, m, n, k int, A cu.DevicePtr, lda int, B cu.DevicePtr, ldb int, beta float32, Cp cu.DevicePtr, ldc int) {
	be.gemm16to(op, ta, tb, m, n, k, A, lda, B, ldb, beta, Cp, ldc, false)
}

// gemm16to is gemm16 into a float32 C, or with c16 a bf16 one.
func (be *Backend) gemm16to(op string, ta, tb, m, n, k int, A cu.DevicePtr, lda int, B cu.DevicePtr, ldb int, beta float32, Cp cu.DevicePtr, ldc int, c16 bool) {
	if be.error() != nil || A == 0 || B == 0 {
		return
	}
	t := be.begin()
	err := be.blas.gemm16(ta, tb, m, n, k, 1, A, lda, B, ldb, beta, Cp, ldc, c16)
	name := "gemm bf16"
	if c16 {
		name = "gemm bf16>bf16"
	}
	be.endGemm(t, name, ta, tb, m, n, k, 1)
	if err != nil {
		be.fail(op, "%v", err)
	}
}

// fail records the first error; ops on either thread may call it.
func (be *Backend) fail(op string, format string, a ...any) {
	be.mu.Lock()
	defer be.mu.Unlock()
	if be.err == nil {
		be.err = fmt.Errorf("cuda: %s: %s", op, fmt.Sprintf(format, a...))
	}
}

// error returns the sticky error recorded so far (without waiting).
func (be *Backend) error() error {
	be.mu.Lock()
	defer be.mu.Unlock()
	return be.err
}

// get unwraps x; nil stays nil. A frozen bf16-only buffer is refused:
// only the weight operands of products and embedding lookups read it
// (weight).
func (be *Backend) get(op string, x gpu.Buf) *buf {
	b := be.weight(op, x)
	if b != nil && b.a.only16 {
		if b.a.act {
			be.fail(op, "a bf16 activation (AllocBF16) is written only by rmsnorm and swiglu and read only by matrix products")
		} else {
			be.fail(op, "a frozen bf16 weight buffer (UploadFrozen) is read only as a matmul weight or an embedding table")
		}
		return nil
	}
	return b
}

// weight unwraps x as get does, bf16-only buffers included.
func (be *Backend) weight(op string, x gpu.Buf) *buf {
	b := be.unwrap(op, x)
	be.settle(b)
	return b
}

// dest unwraps the output x of an op that may take a pending zero of it
// (take): as get, but without settling.
func (be *Backend) dest(op string, x gpu.Buf) *buf {
	b := be.unwrap(op, x)
	if b != nil && b.a.only16 {
		return be.get(op, x) // refused there
	}
	return b
}

// unwrap is x as this package's buffer, nil for nil; a foreign or freed
// buffer fails op.
func (be *Backend) unwrap(op string, x gpu.Buf) *buf {
	if x == nil {
		return nil
	}
	b, ok := x.(*buf)
	if !ok {
		be.fail(op, "buffer of type %T does not belong to the cuda backend", x)
		return nil
	}
	if b.a.freed {
		be.fail(op, "use of a freed buffer")
	}
	return b
}

// need checks pairs (name, *buf) have at least n elements. A nil *buf
// fails, so optional outputs are checked by the caller only when present.
func (be *Backend) need(op string, n int, bufs ...any) bool {
	if be.error() != nil {
		return false
	}
	if n < 0 {
		be.fail(op, "negative size %d", n)
		return false
	}
	for i := 0; i+1 < len(bufs); i += 2 {
		b := bufs[i+1].(*buf)
		if b == nil {
			be.fail(op, "%s is nil", bufs[i])
			return false
		}
		if b.n < n {
			be.fail(op, "%s has %d elements, need %d", bufs[i], b.n, n)
			return false
		}
	}
	return be.error() == nil
}

func (be *Backend) alloc(n int) (*buf, error) {
	p, err := cu.MemAlloc(int64(4 * max(n, 1)))
	if err != nil {
		return nil, fmt.Errorf("cuda: alloc %d floats: %w", n, err)
	}
	if err := cu.MemsetD32(p, 0, int64(max(n, 1))); err != nil {
		return nil, fmt.Errorf("cuda: alloc %d floats: zero: %w", n, err)
	}
	return &buf{a: &alloc{ptr: p, n: n}, n: n}, nil
}

// Alloc implements gpu.Backend.
func (be *Backend) Alloc(n int) (gpu.Buf, error) {
	if n < 0 {
		return nil, fmt.Errorf("cuda: alloc: negative size %d", n)
	}
	var b *buf
	var err error
	be.do(func() { b, err = be.alloc(n) })
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Slice implements gpu.Backend.
func (be *Backend) Slice(x gpu.Buf, off, n int) gpu.Buf {
	b := be.unwrap("slice", x)
	if b == nil || off < 0 || n < 0 || off+n > b.n {
		ln := 0
		if b != nil {
			ln = b.n
		}
		be.fail("slice", "window [%d:%d] out of range of %d elements", off, off+n, ln)
		return &buf{a: &alloc{freed: true}}
	}
	return &buf{a: b.a, off: b.off + off, n: n}
}

// Free implements gpu.Backend.
func (be *Backend) Free(x gpu.Buf) {
	b, ok := x.(*buf)
	if !ok || b.a.freed || b.off != 0 || b.n != b.a.n {
		return
	}
	b.a.freed = true
	be.forget(b.a)
	be.do(func() {
		if b.a.ptr != 0 {
			_ = cu.MemFree(b.a.ptr)
		}
		if b.a.half != 0 {
			_ = cu.MemFree(b.a.half)
		}
	})
}

// Upload implements gpu.Backend.
func (be *Backend) Upload(dst gpu.Buf, src []float32) {
	d := be.get("upload", dst)
	if !be.need("upload", len(src), "dst", d) || len(src) == 0 {
		return
	}
	be.do(func() {
		be.wrote(d)
		t := be.begin()
		if err := cu.MemcpyHtoD(d.ptr(), unsafe.Pointer(&src[0]), int64(4*len(src))); err != nil {
			be.fail("upload", "%v", err)
		}
		be.end(t, "memcpy HtoD", 0)
	})
}

// Download implements gpu.Backend.
func (be *Backend) Download(dst []float32, src gpu.Buf) error {
	s := be.get("download", src)
	if !be.need("download", len(dst), "src", s) {
		return be.error()
	}
	be.do(func() {
		if err := cu.Synchronize(); err != nil {
			be.fail("download", "kernel failure: %v", err)
			return
		}
		if len(dst) > 0 {
			t := be.begin()
			if err := cu.MemcpyDtoH(unsafe.Pointer(&dst[0]), s.ptr(), int64(4*len(dst))); err != nil {
				be.fail("download", "%v", err)
			}
			be.end(t, "memcpy DtoH", 0)
		}
	})
	return be.error()
}

// Err implements gpu.Backend.
func (be *Backend) Err() error {
	if err := be.error(); err != nil {
		return err
	}
	be.do(func() {
		if err := cu.Synchronize(); err != nil {
			be.fail("synchronize", "%v", err)
		}
	})
	return be.error()
}

// Close destroys the context, freeing all device memory of this backend,
// and ends its thread. The backend must not be used after.
func (be *Backend) Close() error {
	if be.q != nil {
		close(be.q)
		<-be.done
		be.q = nil
	}
	be.fail("close", "backend closed")
	return nil
}

// colSum launches col_sum: dst[c] += sum_n a[n,c]*b[n,c]*r[n] (b, r optional).
func (be *Backend) colSum(dst, a, b, r *buf, N, C int) {
	if N == 0 || C == 0 {
		return
	}
	// Rows a block such that the grid has about four blocks an SM
	// (be.blocks is 32 an SM), at least 64 so the atomic adds stay few:
	// narrow inputs (a 128-column bias) need many row blocks to keep the
	// card busy.
	cols, tb := (C+31)/32, be.blocks/8
	rows := max(64, ((N*cols+tb-1)/tb+7)/8*8)
	be.launchGrid("col_sum", cols, (N+rows-1)/rows, dst, a, b, r, N, C, rows)
}

// launch runs kernel name over grid blocks of block threads. Arguments are
// *buf (device pointer, nil for "none"), int (int32), int64, float32.
// Call it on the driver thread.
func (be *Backend) launch(name string, grid int, args ...any) {
	be.launchGrid(name, grid, 1, args...)
}

// launchGrid is launch over a gx×gy grid.
func (be *Backend) launchGrid(name string, gx, gy int, args ...any) {
	be.launchDims(name, gx, gy, block, args...)
}

// launchDims is launch over a gx×gy grid of blocks of threads threads.
func (be *Backend) launchDims(name string, gx, gy, threads int, args ...any) {
	if be.error() != nil || gx <= 0 || gy <= 0 {
		return
	}
	fn, ok := be.fns[name]
	if !ok {
		be.fail(name, "kernel missing from the PTX")
		return
	}
	vals := make([]uint64, len(args))
	ps := make([]unsafe.Pointer, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case *buf:
			if v != nil {
				vals[i] = uint64(v.ptr())
			}
		case cu.DevicePtr:
			vals[i] = uint64(v)
		case int:
			vals[i] = uint64(uint32(int32(v)))
		case int64:
			vals[i] = uint64(v)
		case float32:
			vals[i] = uint64(math.Float32bits(v))
		default:
			be.fail(name, "argument %d of type %T", i, a)
			return
		}
		ps[i] = unsafe.Pointer(&vals[i])
	}
	t := be.begin()
	if err := fn.Launch(gx, gy, 1, threads, 1, 1, 0, cu.Stream{}, ps); err != nil {
		be.fail(name, "launch: %v", err)
	}
	be.end(t, name, 0)
}

// gridFor is the grid of a grid-stride kernel over n elements.
func (be *Backend) gridFor(n int) int {
	return min((n+block-1)/block, be.blocks)
}

// uploadInts copies ids into the token scratch buffer (driver thread).
func (be *Backend) uploadInts(op string, ids []int32) *buf {
	if len(ids) == 0 {
		return nil
	}
	if be.toks == nil || be.toks.n < len(ids) {
		if be.toks != nil {
			_ = cu.MemFree(be.toks.a.ptr)
		}
		b, err := be.alloc(max(len(ids), 4096))
		if err != nil {
			be.fail(op, "%v", err)
			return nil
		}
		be.toks = b
	}
	if err := cu.MemcpyHtoD(be.toks.ptr(), unsafe.Pointer(&ids[0]), int64(4*len(ids))); err != nil {
		be.fail(op, "upload ids: %v", err)
		return nil
	}
	return be.toks
}
