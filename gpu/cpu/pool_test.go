package cpu

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// rowsJob records how often each row ran and the bounds of each piece.
type rowsJob struct {
	mu     sync.Mutex
	hits   []int
	pieces [][2]int
}

func (j *rowsJob) run(lo, hi int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for i := lo; i < hi; i++ {
		j.hits[i]++
	}
	j.pieces = append(j.pieces, [2]int{lo, hi})
}

// checkCut checks the documented cut: every row once, in contiguous
// pieces of at least grain rows (all but the last), aligned, at most
// piecesPerWorker a worker.
func checkCut(t *testing.T, p *pool, j *rowsJob, n, grain, align int) {
	t.Helper()
	for i, h := range j.hits {
		if h != 1 {
			t.Fatalf("n=%d grain=%d align=%d workers=%d: row %d ran %d times", n, grain, align, p.n, i, h)
		}
	}
	slices.SortFunc(j.pieces, func(a, b [2]int) int { return a[0] - b[0] })
	if len(j.pieces) > max(1, p.n*piecesPerWorker) {
		t.Fatalf("n=%d: %d pieces for %d workers", n, len(j.pieces), p.n)
	}
	for i, pc := range j.pieces {
		if len(j.pieces) > 1 && i+1 < len(j.pieces) && (pc[1]-pc[0] < grain || (pc[1]-pc[0])%align != 0) {
			t.Fatalf("n=%d grain=%d align=%d: piece %v", n, grain, align, pc)
		}
	}
}

// TestPoolCoversRowsOnce: over many rounds of random sizes every row runs
// exactly once, in pieces that depend only on the sizes and the worker
// count (run with -race: the pieces are handed between goroutines).
func TestPoolCoversRowsOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, workers := range []int{1, 2, 3, 8} {
		p := newPool(workers)
		cuts := map[[3]int][][2]int{}
		for range 2000 {
			n, grain, align := r.IntN(300), 1+r.IntN(20), 1+r.IntN(4)
			j := &rowsJob{hits: make([]int, n)}
			p.parallel(j, n, grain, align)
			checkCut(t, p, j, n, grain, align)
			key := [3]int{n, grain, align}
			if prev, ok := cuts[key]; ok && !slices.Equal(prev, j.pieces) {
				t.Fatalf("workers=%d n=%d grain=%d align=%d: cut %v then %v", workers, n, grain, align, prev, j.pieces)
			}
			cuts[key] = j.pieces
		}
		p.close()
	}
}

// TestPoolCallerAlone: a round completes on the calling goroutine when no
// worker ever takes a piece (asleep, or busy on another core), and a full
// wake-up queue does not block the caller.
func TestPoolCallerAlone(t *testing.T) {
	p := &pool{n: 4, wake: make(chan struct{}, 1), finished: make(chan struct{}, 1)} // no workers
	for n := range 100 {
		j := &rowsJob{hits: make([]int, n)}
		p.parallel(j, n, 1, 1)
		checkCut(t, p, j, n, 1, 1)
	}
}
