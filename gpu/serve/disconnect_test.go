package serve

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"swerl/gpu/modeldir"
	"swerl/gpu/policy"
	"swerl/internal/testenv"
)

// endlessPolicy serves the tiny model with no stop token, so that every
// completion runs to max_tokens: a request goes on sampling until it is
// cancelled or done.
func endlessPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	dir := t.TempDir()
	if _, err := modeldir.Init(dir, "small", 3); err != nil {
		t.Fatal(err)
	}
	mp, err := modeldir.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	mp.Stop = nil
	pol, err := policy.FromLoaded(mp, policy.Options{MaxSeq: 2048, Batch: 32, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pol.Close() })
	return pol
}

// waitFor polls cond until it holds, failing the test after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, limit, what, cond)
}

// Generation stops when the client goes away: for a request that would
// sample 16 completions of 1500 tokens (24000 tokens), the client hangs
// up once sampling has begun (streamed or not, live or not, its body sent
// with a length or chunked), and the tokens sampled after that are
// counted: after the server's context for the request is cancelled, at
// most the step in flight; after the hang-up, a few steps (the server
// notices it a moment later), not the rest of the request. The small
// built-in model makes a step long enough for that moment to be a step
// or two.
func TestGenerationStopsWhenTheClientLeaves(t *testing.T) {
	pol := endlessPolicy(t)
	s := New(pol, "small")
	// The server's own view: the tokens sampled when a request's context
	// was cancelled (the server saw the client leave).
	var atCancel atomic.Int64
	hs := s.HTTPServer()
	h := hs.Handler
	hs.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		context.AfterFunc(r.Context(), func() { atCancel.Store(pol.TokensSampled()) })
		h.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	addr := ln.Addr().String()
	const maxTokens = 1500
	for _, tc := range []struct {
		name, path, body string
		n                int
		chunked          bool
	}{
		{"chat n=16 streamed", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"n":16,"stream":true,"max_tokens":%d}`, 16, false},
		{"chat n=16", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"n":16,"max_tokens":%d}`, 16, false},
		{"completions n=1 live stream", "/v1/completions", `{"prompt":"def f():","stream":true,"max_tokens":%d}`, 1, false},
		{"completions n=16, chunked body", "/v1/completions", `{"prompt":"def f():","n":16,"max_tokens":%d}`, 16, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := fmt.Sprintf(tc.body, maxTokens)
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			start := pol.TokensSampled()
			if tc.chunked {
				fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", tc.path, len(body), body)
			} else {
				fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", tc.path, len(body), body)
			}
			if tc.n == 1 {
				// The live stream: its first event has come.
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						t.Fatal(err)
					}
					if strings.HasPrefix(line, "data: ") {
						break
					}
				}
			} else {
				waitFor(t, 30*time.Second, "sampling to begin", func() bool { return pol.TokensSampled() > start })
			}
			atCancel.Store(-1)
			c.Close()
			left := pol.TokensSampled()
			waitFor(t, 30*time.Second, "the request to end", func() bool {
				return atCancel.Load() >= 0 && len(s.admit) == 0 && len(s.compute) == 0
			})
			end := pol.TokensSampled()
			after, afterCancel := end-left, end-atCancel.Load()
			t.Logf("%d tokens sampled before the client left, %d after, %d after the server saw it (the request asked for %d)",
				left-start, after, afterCancel, tc.n*maxTokens)
			// The step in flight when the context is cancelled finishes;
			// no step starts after it (the drive loop checks contexts).
			if afterCancel > int64(tc.n) {
				t.Errorf("%d tokens sampled after the request's context was cancelled, want at most %d (the step in flight)", afterCancel, tc.n)
			}
			// Noticing the hang-up takes the server a moment: a few steps
			// at most, not the rest of the request.
			if bound := int64(16 * tc.n); after > bound {
				t.Errorf("%d tokens sampled after the client left, want at most %d (16 steps of %d, of the request's %d)", after, bound, tc.n, maxTokens)
			}
			if left-start >= int64(tc.n*maxTokens) {
				t.Fatalf("the request was done before the client left: the test shows nothing")
			}
		})
	}
}
