package reward

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// inOrderRecords are records of very different costs (a large file's
// similarity against one-line edits), with records that came with an
// error between them.
func inOrderRecords() (recs []Record, errs []error) {
	var big strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&big, "line %d\n", i)
	}
	for i := range 40 {
		var rec Record
		var err error
		switch {
		case i%7 == 3:
			rec, err = Record{ID: fmt.Sprint("bad", i)}, fmt.Errorf("in:%d: invalid record", i+1)
		case i%5 == 0:
			file := big.String()
			rec = Record{ID: fmt.Sprint("big", i), CodeContext: map[string]string{"a.py": file},
				OracleNewContent: map[string]string{"a.py": strings.Replace(file, "line 7\n", "line seven\n", 1)},
				Output:           answer(block("a.py", "line 1\nline 2", "line one\nline 2"))}
		default:
			rec = Record{ID: fmt.Sprint("small", i), CodeContext: map[string]string{"a.py": "x = 1\n"},
				OracleNewContent: map[string]string{"a.py": "x = 2\n"},
				Output:           answer(block("a.py", "x = 1", fmt.Sprint("x = ", i%3)))}
		}
		recs, errs = append(recs, rec), append(errs, err)
	}
	return recs, errs
}

// Whatever each record costs and however many workers score them, the
// results come back in the order read gave them, each what Score gives
// its record alone, and a record that came with an error as its error
// record.
func TestScoreInOrderKeepsOrder(t *testing.T) {
	recs, errs := inOrderRecords()
	read := func(emit func(int64, Record, error) error) error {
		for i := range recs {
			if err := emit(int64(i+1), recs[i], errs[i]); err != nil {
				return err
			}
		}
		return nil
	}
	ctx := context.Background()
	for _, workers := range []int{1, 4} {
		jobs, wait := ScoreInOrder(ctx, read, workers, 0)
		i := 0
		for j := range jobs {
			if !j.Wait(ctx) {
				t.Fatal("Wait: false with a live context")
			}
			got := j.Scored()
			if got.Line != int64(i+1) || got.ID != recs[i].ID {
				t.Fatalf("workers %d: result %d is line %d (%s), want line %d (%s)", workers, i, got.Line, got.ID, i+1, recs[i].ID)
			}
			if errs[i] != nil {
				if !j.Invalid() || got.Mode != "invalid" || got.Reward != -1 || got.Error != errs[i].Error() {
					t.Errorf("workers %d: %s: %+v, want the error record", workers, got.ID, got)
				}
			} else {
				want := Score(ctx, &recs[i], 0)
				if j.Invalid() || got.Mode != recs[i].Mode() || got.Reward != want.Reward || got.Error != want.Error || len(got.Similarities) != len(want.Similarities) {
					t.Errorf("workers %d: %s: %+v, want %+v", workers, got.ID, got, want)
				}
			}
			i++
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		if i != len(recs) {
			t.Errorf("workers %d: %d results for %d records", workers, i, len(recs))
		}
	}
}

// wait returns read's error, and a cancelled context stops read and the
// workers: wait returns though the caller stopped receiving.
func TestScoreInOrderStops(t *testing.T) {
	boom := errors.New("boom")
	jobs, wait := ScoreInOrder(context.Background(), func(emit func(int64, Record, error) error) error {
		if err := emit(1, Record{ID: "a", Output: "x"}, nil); err != nil {
			return err
		}
		return boom
	}, 2, 0)
	n := 0
	for range jobs {
		n++
	}
	if err := wait(); !errors.Is(err, boom) || n != 1 {
		t.Errorf("%d results, wait: %v; want 1 and boom", n, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	jobs, wait = ScoreInOrder(ctx, func(emit func(int64, Record, error) error) error {
		for i := int64(1); ; i++ {
			if err := emit(i, Record{ID: "r", Output: "x"}, nil); err != nil {
				return err
			}
		}
	}, 2, 0)
	<-jobs
	cancel()
	done := make(chan error, 1)
	go func() { done <- wait() }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("wait after cancel: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("wait still blocked 30s after the context was cancelled")
	}
}
