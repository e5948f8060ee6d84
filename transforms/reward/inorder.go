package reward

import (
	"context"
	"sync"
	"time"
)

// Pending is one record on its way through ScoreInOrder.
type Pending struct {
	rec     Record
	out     Scored
	invalid bool
	done    chan struct{}
}

// Wait waits until p is scored and reports true, or false when ctx ends
// first.
func (p *Pending) Wait(ctx context.Context) bool {
	select {
	case <-p.done:
	case <-ctx.Done():
	}
	return ctx.Err() == nil
}

// Scored is p's result, once Wait has reported true.
func (p *Pending) Scored() *Scored { return &p.out }

// Invalid reports whether p's record came with an error (a line that did
// not decode): its result is then the error record, with mode "invalid",
// reward −1 and the error's text.
func (p *Pending) Invalid() bool { return p.invalid }

// ScoreInOrder scores records on workers goroutines (workers ≥ 1), each
// with Score under timeout, and hands them back in the order they were
// read, so output order is input order whatever each record costs.
//
// read calls emit with each record, its 1-based line (or row) and the
// error of a record that did not decode; emit's error (ctx ended) is one
// for read to return. ScoreInOrder returns the records in read's order,
// each done when scored (one that came with an error is done at once, as
// its error record), and a function that waits for read and the workers
// and returns read's error. The caller receives from the channel until it
// closes (wait drains what it leaves) and then calls wait.
func ScoreInOrder(ctx context.Context, read func(emit func(line int64, rec Record, err error) error) error, workers int, timeout time.Duration) (<-chan *Pending, func() error) {
	work := make(chan *Pending, 4*workers)
	order := make(chan *Pending, 64*workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				res := Score(ctx, &j.rec, timeout)
				j.out.ID, j.out.Mode = j.rec.ID, j.rec.Mode()
				j.out.Reward, j.out.Error, j.out.Similarities = res.Reward, res.Error, res.Similarities
				close(j.done)
			}
		}()
	}
	readErr := make(chan error, 1)
	go func() {
		defer close(order)
		defer close(work)
		readErr <- read(func(line int64, rec Record, err error) error {
			j := &Pending{rec: rec, out: Scored{Line: line}, done: make(chan struct{})}
			if err != nil {
				j.invalid = true
				j.out.ID, j.out.Mode, j.out.Reward, j.out.Error = rec.ID, "invalid", -1, err.Error()
				close(j.done)
			}
			select {
			case order <- j:
			case <-ctx.Done():
				return ctx.Err()
			}
			if !j.invalid {
				select {
				case work <- j:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
	}()
	return order, func() error {
		// Drain so the reader and workers finish.
		for range order {
		}
		wg.Wait()
		return <-readErr
	}
}
