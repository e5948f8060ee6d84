package rollout

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"swerl/internal/engineapi"
	"swerl/internal/fakeengine"
	"swerl/internal/testenv"
	"swerl/sinks/weightsync"
)

// restartable is an engine on a fixed loopback address whose process can
// be killed and started again, without what it held.
type restartable struct {
	addr string
	cur  atomic.Pointer[fakeengine.VLLM]
	srv  *http.Server
}

func newRestartable(t *testing.T) *restartable {
	r := &restartable{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(func() { r.srv.Close() })
	return r
}

func (r *restartable) serve(ln net.Listener) {
	r.cur.Store(&fakeengine.VLLM{})
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) { r.cur.Load().ServeHTTP(w, q) })}
	go r.srv.Serve(ln)
}

// kill closes the listener and every connection.
func (r *restartable) kill() { r.srv.Close() }

// start serves again on the same address, holding nothing.
func (r *restartable) start(t *testing.T) {
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	r.serve(ln)
}

// A vLLM restarted under a synced run loses its adapters. The next request
// either gets vLLM's 404 for the adapter (restarted between two requests)
// or finds no server (down, then back): the weight sync loads the adapter
// again onto the new process, and the request is answered by the version
// the run pushed, once, never by the base.
func TestRestartedEngineGetsItsAdapterBack(t *testing.T) {
	eng := newRestartable(t)
	root := t.TempDir()
	dir := filepath.Join(root, "v000002")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "adapter_config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	table := weightsync.NewTable()
	url := "http://" + eng.addr + "/v1"
	s, err := weightsync.New(weightsync.Config{Engines: []weightsync.Engine{{URL: url, Kind: engineapi.VLLM}}, Table: table, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Push(ctx, 2, dir); err != nil {
		t.Fatal(err)
	}
	pol, err := OpenHTTP(url+"?model=base&retries=200&backoff=5ms", WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	// check sends one request (it may run in another goroutine: it
	// reports with Errorf).
	check := func(when string) {
		r, err := pol.Complete(ctx, Request{InstanceID: "i", Prompt: "p", N: 2})
		if err != nil {
			t.Errorf("%s: %v", when, err)
			return
		}
		if r.PolicyVersion != 2 || len(r.Completions) != 2 || r.Completions[0].Text != "from swerl-v000002" {
			t.Errorf("%s: version %d, %+v", when, r.PolicyVersion, r.Completions)
		}
		v := eng.cur.Load()
		v.Mu.Lock()
		defer v.Mu.Unlock()
		if v.Loaded["swerl-v000002"] != dir || v.Chats != 1 {
			t.Errorf("%s: the engine holds %v and answered %d chats", when, v.Loaded, v.Chats)
		}
	}
	check("before a restart")

	// Restarted between two requests: vLLM's 404 for the adapter.
	eng.kill()
	eng.start(t)
	check("restarted between requests")

	// Down while the request is sent, back later.
	eng.kill()
	done := make(chan struct{})
	go func() { defer close(done); check("down, then back") }()
	before := pol.RetriesDone.Load()
	testenv.Eventually(t, 10*time.Second, "retries of the request to the down engine", func() bool { return pol.RetriesDone.Load() >= before+3 && table.Lost(url) })
	eng.start(t)
	<-done
}
