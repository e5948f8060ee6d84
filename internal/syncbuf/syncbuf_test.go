package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writers and a reader run at once (go test -race checks the locking);
// every write lands whole.
func TestConcurrentWritesAndReads(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("ab"))
			}
		})
	}
	wg.Go(func() {
		for range 100 {
			if s := b.String(); strings.Count(s, "ab") != len(s)/2 {
				t.Errorf("torn write in %q", s)
				return
			}
		}
	})
	wg.Wait()
	if got := b.String(); got != strings.Repeat("ab", 800) {
		t.Fatalf("%d bytes, want 1600", len(got))
	}
}
