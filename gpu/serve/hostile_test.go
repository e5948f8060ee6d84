package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"swerl/gpu/modeldir"
	"swerl/gpu/policy"
	"swerl/internal/engineapi"
	"swerl/internal/syncbuf"
	"swerl/internal/testenv"
	"swerl/schemas"
	"swerl/sinks/checkpoint"
	"swerl/sinks/parquetio/parquettest"
)

// listen starts s on a loopback port with its HTTPServer (the timeouts
// under test) and returns its address.
func listen(t testing.TB, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := s.HTTPServer()
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

// tinyPolicy opens a policy with options o over a new tiny model of the
// given seed, closed when the test ends, and returns it with the model
// directory.
func tinyPolicy(t testing.TB, seed uint64, o policy.Options) (*policy.Policy, string) {
	t.Helper()
	dir := t.TempDir()
	if _, err := modeldir.Init(dir, "tiny", seed); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pol.Close() })
	return pol, dir
}

// hostilePolicy is the policy the hostile-client tests serve.
func hostilePolicy(t testing.TB) *policy.Policy {
	pol, _ := tinyPolicy(t, 3, policy.Options{MaxSeq: 256, MaxTokens: 16, Log: quiet()})
	return pol
}

// loadScale is 1 for the default (short) load test and 5 with
// SWERL_SERVE_LOAD=long: 1000 stalled connections, 320 concurrent requests.
func loadScale() int {
	if os.Getenv("SWERL_SERVE_LOAD") == "long" {
		return 5
	}
	return 1
}

// stall opens a connection that sends the headers of a chat request with
// a body of declared length and then stalls.
func stall(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"messages\":")
	return c
}

// Connections that send their headers and stall their body are closed by
// the read timeout, which covers the body: each gets an error answer (or
// none) and EOF within the timeout plus scheduling slack.
func TestStalledBodiesAreClosed(t *testing.T) {
	s := New(hostilePolicy(t), "tiny")
	s.ReadTimeout = time.Second
	addr := listen(t, s)
	n := 200 * loadScale()
	conns := make([]net.Conn, n)
	start := time.Now()
	for i := range conns {
		conns[i] = stall(t, addr)
	}
	opened := time.Since(start)
	var wg sync.WaitGroup
	closedAfter := make([]time.Duration, n)
	for i, c := range conns {
		wg.Go(func() {
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(s.ReadTimeout + 10*time.Second))
			_, err := io.Copy(io.Discard, c) // until the server closes
			if err != nil {
				closedAfter[i] = -1
				return
			}
			closedAfter[i] = time.Since(start)
		})
	}
	wg.Wait()
	slices.Sort(closedAfter)
	if closedAfter[0] < 0 {
		t.Fatalf("a stalled connection was still open %v after the read timeout", 10*time.Second)
	}
	last := closedAfter[n-1]
	t.Logf("%d stalled connections (opened in %v) all closed by the server; first after %v, last after %v (read timeout %v)",
		n, opened.Round(time.Millisecond), closedAfter[0].Round(time.Millisecond), last.Round(time.Millisecond), s.ReadTimeout)
	if last > opened+s.ReadTimeout+5*time.Second {
		t.Errorf("last stalled connection closed after %v, read timeout %v", last, s.ReadTimeout)
	}
	// The server still answers.
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// Beyond MaxConcurrent running and MaxQueue waiting, a request is answered
// 429 with Retry-After and a JSON error, before its body is read; the
// stalled requests that held the places are cut by the read timeout and
// the server serves again.
func TestBusyIs429WithRetryAfter(t *testing.T) {
	s := New(hostilePolicy(t), "tiny")
	s.MaxConcurrent, s.MaxQueue, s.ReadTimeout = 1, 2, 2*time.Second
	addr := listen(t, s)
	var held []net.Conn
	for range s.MaxConcurrent + s.MaxQueue {
		held = append(held, stall(t, addr))
	}
	testenv.Eventually(t, 30*time.Second, "the server admits the stalled requests", func() bool { return len(s.admit) == cap(s.admit) })
	body := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`
	resp, raw := postRaw(t, "http://"+addr+"/v1/chat/completions", body)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !json.Valid(raw) || !strings.Contains(string(raw), "busy") {
		t.Fatalf("with every place held: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), raw)
	}
	for _, c := range held {
		c.Close()
	}
	testenv.Eventually(t, 30*time.Second, "a 200 after the held requests closed", func() bool {
		resp, _ := postRaw(t, "http://"+addr+"/v1/chat/completions", body)
		return resp.StatusCode == 200
	})
	// A body over MaxBody is a 413.
	s2 := New(hostilePolicy(t), "tiny")
	s2.MaxBody = 1 << 10
	addr2 := listen(t, s2)
	big := `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 4<<10) + `"}]}`
	resp, _ = postRaw(t, "http://"+addr2+"/v1/chat/completions", big)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("body over MaxBody: %d, want 413", resp.StatusCode)
	}
}

func heapInuse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// The load test: 64 concurrent chat requests (320 with
// SWERL_SERVE_LOAD=long) are each answered 200 or 429 (with Retry-After),
// latencies logged; then as many concurrent requests with 1 MiB prompts,
// answered 400 (too long for the model), 413 or 429, with the heap's peak
// growth bounded by the admitted requests, not the offered ones.
func TestLoad(t *testing.T) {
	s := New(hostilePolicy(t), "tiny")
	s.MaxConcurrent, s.MaxQueue, s.MaxBody = 2, 8, 2<<20
	addr := listen(t, s)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512}, Timeout: 60 * time.Second}
	n := 64 * loadScale()

	before := heapInuse()
	var peak atomic.Uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			select {
			case <-stopSampling:
				return
			case <-time.After(5 * time.Millisecond):
			}
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
		}
	}()

	fire := func(body func(i int) []byte) (codes map[int]int, lat []time.Duration) {
		codes = map[int]int{}
		lat = make([]time.Duration, n)
		var mu sync.Mutex
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-gate
				t0 := time.Now()
				resp, err := client.Post("http://"+addr+"/v1/chat/completions", "application/json", bytes.NewReader(body(i)))
				if err != nil {
					t.Errorf("request %d: %v", i, err)
					return
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				lat[i] = time.Since(t0)
				if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
					t.Errorf("429 without Retry-After")
				}
				if !json.Valid(raw) {
					t.Errorf("status %d with a body that is not JSON: %.100q", resp.StatusCode, raw)
				}
				mu.Lock()
				codes[resp.StatusCode]++
				mu.Unlock()
			})
		}
		close(gate)
		wg.Wait()
		slices.Sort(lat)
		return codes, lat
	}

	codes, lat := fire(func(i int) []byte {
		return fmt.Appendf(nil, `{"messages":[{"role":"user","content":"request %d"}],"max_tokens":16,"seed":%d}`, i, i)
	})
	t.Logf("%d concurrent requests (max %d running, %d queued): %v; latency p50 %v p99 %v max %v", n,
		s.MaxConcurrent, s.MaxQueue, codes, lat[n/2].Round(time.Microsecond), lat[n*99/100].Round(time.Microsecond), lat[n-1].Round(time.Microsecond))
	if codes[200]+codes[429] != n || codes[200] == 0 {
		t.Errorf("answers %v: want only 200 and 429, some 200", codes)
	}

	// One body shared by the clients, so that the heap measured is the
	// server's.
	big := fmt.Appendf(nil, `{"messages":[{"role":"user","content":"%s"}],"max_tokens":4}`, strings.Repeat("x", 1<<20))
	codes, lat = fire(func(int) []byte { return big })
	close(stopSampling)
	<-sampled
	after := heapInuse()
	grew := int64(peak.Load()) - int64(before)
	t.Logf("%d concurrent 1 MiB prompts: %v; latency p50 %v p99 %v; heap in use %d MiB before, peak +%d MiB, %d MiB after",
		n, codes, lat[n/2].Round(time.Microsecond), lat[n*99/100].Round(time.Microsecond), before>>20, grew>>20, after>>20)
	for code := range codes {
		if code != 400 && code != 413 && code != 429 {
			t.Errorf("1 MiB prompts: answers %v", codes)
		}
	}
	// Each admitted request holds its body and the decoded prompt, a few
	// MiB for a 1 MiB prompt: 10 admitted grew the heap by 51-54 MiB at its
	// peak, 64 admitted at once (MaxQueue 1000) by 176 MiB. The bound
	// leaves room for the collector to run behind.
	if limit := int64(s.MaxConcurrent+s.MaxQueue) * 12 << 20; grew > limit {
		t.Errorf("heap grew by %d MiB at its peak, more than %d MiB for %d admitted requests", grew>>20, limit>>20, s.MaxConcurrent+s.MaxQueue)
	}
	if after > before+32<<20 {
		t.Errorf("heap in use %d MiB after the load, %d MiB before", after>>20, before>>20)
	}
}

// nanPolicy serves a model whose final norm weights are NaN, so every
// logit is NaN. modeldir.Load refuses such weights, so they are made in
// memory: the 500 below is the defence behind that check.
func nanPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	dir := t.TempDir()
	if _, err := modeldir.Init(dir, "tiny", 5); err != nil {
		t.Fatal(err)
	}
	mp, err := modeldir.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	norm := mp.Model.Params.Norm
	for i := range norm {
		norm[i] = float32(math.NaN())
	}
	pol, err := policy.FromLoaded(mp, policy.Options{MaxSeq: 128, MaxTokens: 4, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pol.Close() })
	return pol
}

// A completion that cannot be encoded (NaN log-probabilities from a model
// with NaN weights) is a 500 with a JSON error that says so, not a 200
// with an empty body.
func TestUnencodableResponseIs500(t *testing.T) {
	addr := listen(t, New(nanPolicy(t), "nan"))
	body := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"logprobs":true,"seed":1}`
	resp, raw := postRaw(t, "http://"+addr+"/v1/chat/completions", body)
	var e struct {
		Error struct{ Message, Type string } `json:"error"`
	}
	if resp.StatusCode != 500 || json.Unmarshal(raw, &e) != nil || e.Error.Type != "server_error" || !strings.Contains(e.Error.Message, "NaN") {
		t.Fatalf("status %d body %q", resp.StatusCode, raw)
	}
}

// The reload poll compares the index's newest row before verifying
// anything: with the served checkpoint's files altered after loading,
// polls that see the same newest row hash nothing (no corrupt-checkpoint
// warning), and serving goes on. A damaged index (bytes on which
// parquet-go alone panics) is logged and the old model keeps serving.
func TestReloadHashesOnlyOnChangeAndSurvivesADamagedIndex(t *testing.T) {
	root := t.TempDir()
	st, err := checkpoint.Open(checkpoint.Config{Dir: root, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Publish(schemas.WeightVersion{Version: 0}, func(d string) error {
		_, err := modeldir.Init(d, "tiny", 1)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	pol, err := policy.Open(root, policy.Options{MaxSeq: 128, MaxTokens: 4, Poll: 10 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	addr := listen(t, New(pol, "tiny"))
	ask := func() (int, string) {
		resp, _ := postRaw(t, "http://"+addr+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"seed":3}`)
		return resp.StatusCode, resp.Header.Get(engineapi.VersionHeader)
	}
	// Alter a file of the served checkpoint: hashing it would fail.
	f, err := os.OpenFile(filepath.Join(st.Path(0), "config.json"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(" ")
	f.Close()
	polls := pol.Polls()
	testenv.Eventually(t, time.Minute, "30 polls of the index", func() bool { return pol.Polls() >= polls+30 })
	if strings.Contains(logs.String(), "corrupt") || strings.Contains(logs.String(), "reload failed") {
		t.Fatalf("polls with an unchanged index verified the checkpoint:\n%s", logs.String())
	}
	if code, v := ask(); code != 200 || v != "0" {
		t.Fatalf("status %d version %q", code, v)
	}

	// Damage the index with a footer mutation on which parquet-go alone
	// panics (in its page index, which swerl's reader skips): the server
	// neither dies nor stops serving.
	index := filepath.Join(root, checkpoint.IndexFile)
	good, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	bad := parquettest.PanickingMutation(t, good, 1)
	if err := os.WriteFile(index, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	polls = pol.Polls()
	testenv.Eventually(t, time.Minute, "10 polls of the damaged index", func() bool { return pol.Polls() >= polls+10 })
	if code, v := ask(); code != 200 || v != "0" {
		t.Fatalf("with a panicking index: status %d version %q", code, v)
	}
	// A truncated index cannot be read: each poll logs the error naming
	// it, and version 0 keeps serving.
	if err := os.WriteFile(index, good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "a reload failure logged for the damaged index", func() bool { return strings.Contains(logs.String(), "reload failed") })
	if !strings.Contains(logs.String(), checkpoint.IndexFile) {
		t.Errorf("the reload failure does not name the index:\n%s", logs.String())
	}
	if code, v := ask(); code != 200 || v != "0" {
		t.Fatalf("with a damaged index: status %d version %q", code, v)
	}
}
