package beamrun

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestRegistryLifecycle(t *testing.T) {
	r := NewRegistry[*int]("test value")
	one, two := 1, 2
	release := r.Register("run-1", &one)
	if v, err := r.Lookup("run-1"); err != nil || v != &one {
		t.Fatalf("lookup: %v %v", v, err)
	}
	if _, err := r.Lookup("run-2"); err == nil || !strings.Contains(err.Error(), `no test value for run "run-2" in this process`) {
		t.Fatalf("unknown id: %v", err)
	}
	if _, ok := r.Find("run-2"); ok {
		t.Fatal("found run-2")
	}
	release()
	if _, ok := r.Find("run-1"); ok || r.Len() != 0 {
		t.Fatal("released value still there")
	}
	release() // twice is harmless

	// A release removes its own registration only.
	old := r.Register("run-1", &one)
	r.Register("run-1", &two)
	old()
	if v, _ := r.Find("run-1"); v != &two {
		t.Fatalf("old release removed the new value: %v", v)
	}
	r.Release("run-1")
	if r.Len() != 0 {
		t.Fatal("Release left a value")
	}
}

func TestRegistryLoadOrCreate(t *testing.T) {
	r := NewRegistry[string]("test value")
	boom := errors.New("boom")
	if _, err := r.LoadOrCreate("a", func() (string, error) { return "", boom }); err != boom || r.Len() != 0 {
		t.Fatalf("failed make: %v, %d registered", err, r.Len())
	}
	r.Register("b", "launcher's")
	if v, _ := r.LoadOrCreate("b", func() (string, error) { t.Fatal("made over a registered value"); return "", nil }); v != "launcher's" {
		t.Fatal(v)
	}
}

// Many goroutines over a few ids: each id's value is made once, and every
// caller gets it (run with -race).
func TestRegistryConcurrent(t *testing.T) {
	r := NewRegistry[*atomic.Int64]("counter")
	var made atomic.Int64
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				id := fmt.Sprint("run-", (g+i)%4)
				c, err := r.LoadOrCreate(id, func() (*atomic.Int64, error) { made.Add(1); return new(atomic.Int64), nil })
				if err != nil {
					t.Error(err)
					return
				}
				c.Add(1)
				if v, err := r.Lookup(id); err != nil || v != c {
					t.Errorf("lookup %s: %v %v", id, v, err)
					return
				}
				if i%50 == 0 {
					rel := r.Register(fmt.Sprint("tmp-", g), new(atomic.Int64))
					rel()
				}
			}
		}()
	}
	wg.Wait()
	var total int64
	for i := range 4 {
		c, err := r.Lookup(fmt.Sprint("run-", i))
		if err != nil {
			t.Fatal(err)
		}
		total += c.Load()
	}
	if made.Load() != 4 || total != 32*200 || r.Len() != 4 {
		t.Fatalf("made %d values, counted %d, %d registered", made.Load(), total, r.Len())
	}
}
