package weightsync

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"swerl/internal/engineapi"
	"swerl/internal/fakeengine"
)

// writeVersion writes a published version's folder: a PEFT adapter or full
// weights, files 0644 and folders 0755 as the learner writes them.
func writeVersion(t *testing.T, root string, v int64, adapter bool) string {
	t.Helper()
	dir := filepath.Join(root, "checkpoints", fmt.Sprintf("v%06d", v))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := []string{"config.json", "model.safetensors"}
	if adapter {
		files = []string{"adapter_config.json", "adapter_model.safetensors"}
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

type held struct {
	url string
	v   engineapi.ServedVersion
}

func newSyncer(t *testing.T, cfg Config) (*Syncer, *[]held) {
	t.Helper()
	var got []held
	cfg.OnHeld = func(e Engine, v engineapi.ServedVersion) { got = append(got, held{e.URL, v}) }
	if cfg.Backoff == 0 {
		cfg.Backoff = 1
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, &got
}

// vLLM: each version is loaded under swerl-vNNNNNN from its folder, the
// window keeps the newest 2, and the rollout hook hears of each.
func TestVLLMLoadsAndUnloadsAdapters(t *testing.T) {
	for _, newShape := range []bool{false, true} {
		root := t.TempDir()
		srv := &fakeengine.VLLM{NewShape: newShape}
		ts := httptest.NewServer(srv)
		s, got := newSyncer(t, Config{Engines: []Engine{{URL: ts.URL + "/v1", Kind: engineapi.VLLM}}})
		for v := int64(1); v <= 4; v++ {
			if err := s.Push(context.Background(), v, writeVersion(t, root, v, true)); err != nil {
				t.Fatal(err)
			}
		}
		// Pushing a version the engine holds sends nothing.
		if err := s.Push(context.Background(), 4, filepath.Join(root, "checkpoints", "v000004")); err != nil {
			t.Fatal(err)
		}
		ts.Close()
		want := map[string]string{"swerl-v000003": filepath.Join(root, "checkpoints", "v000003"), "swerl-v000004": filepath.Join(root, "checkpoints", "v000004")}
		if !reflect.DeepEqual(srv.Loaded, want) {
			t.Fatalf("loaded %v, want %v", srv.Loaded, want)
		}
		var seq []string
		for _, c := range srv.Calls {
			if c.Method != "POST" {
				t.Fatalf("method %s", c.Method)
			}
			seq = append(seq, c.Path+" "+c.Body["lora_name"].(string))
		}
		wantSeq := []string{"/v1/load_lora_adapter swerl-v000001", "/v1/load_lora_adapter swerl-v000002", "/v1/load_lora_adapter swerl-v000003",
			"/v1/unload_lora_adapter swerl-v000001", "/v1/load_lora_adapter swerl-v000004", "/v1/unload_lora_adapter swerl-v000002"}
		if !slices.Equal(seq, wantSeq) {
			t.Fatalf("calls\n%v\nwant\n%v", seq, wantSeq)
		}
		if len(srv.Calls[0].Body) != 2 || len(srv.Calls[3].Body) != 1 {
			t.Fatalf("bodies: load %v unload %v", srv.Calls[0].Body, srv.Calls[3].Body)
		}
		if len(*got) != 4 || (*got)[3] != (held{ts.URL, engineapi.ServedVersion{Version: 4, Adapter: "swerl-v000004"}}) {
			t.Fatalf("hook: %+v", *got)
		}
		if h, ok := s.Held(ts.URL + "/v1/chat/completions"); !ok || h.Version != 4 {
			t.Fatalf("held %+v %v", h, ok)
		}
	}
}

// A refusal is retried; when the retries run out the error names the
// engine, the version and the engine's message, and the engine keeps (and
// the rollouts keep naming) the newest version it loaded.
func TestFailedPushKeepsTheHeldVersion(t *testing.T) {
	root := t.TempDir()
	srv := &fakeengine.VLLM{}
	ts := serveTest(t, srv)
	s, got := newSyncer(t, Config{Engines: []Engine{{URL: ts.URL, Kind: engineapi.VLLM}}, Attempts: 4})
	srv.Fail = func(n int, c fakeengine.Call) (int, string) {
		if n <= 2 {
			return 503, "engine overloaded"
		}
		return 0, ""
	}
	if err := s.Push(context.Background(), 5, writeVersion(t, root, 5, true)); err != nil {
		t.Fatalf("two 503s then success: %v", err)
	}
	if len(srv.Calls) != 3 {
		t.Fatalf("%d calls, want 3", len(srv.Calls))
	}
	srv.Fail = func(int, fakeengine.Call) (int, string) { return 400, "LoRA rank 64 is greater than max_lora_rank 16" }
	err := s.Push(context.Background(), 6, writeVersion(t, root, 6, true))
	if err == nil {
		t.Fatal("a refused version must be an error")
	}
	for _, want := range []string{ts.URL, "version 6", "max_lora_rank 16", "after 4 attempts", "rollouts keep swerl-v000005"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if h, _ := s.Held(ts.URL); h.Version != 5 || len(*got) != 1 {
		t.Fatalf("held %+v, hook calls %d", h, len(*got))
	}
	// A folder the engine cannot find (a volume not shared) is reported too.
	srv.Fail = nil
	dir := writeVersion(t, root, 7, true)
	s2, _ := newSyncer(t, Config{Engines: []Engine{{URL: ts.URL, Kind: engineapi.VLLM}}, Attempts: 1, PathMap: root + "=/mnt/elsewhere"})
	if err := s2.Push(context.Background(), 7, dir); err == nil || !strings.Contains(err.Error(), "No adapter found for /mnt/elsewhere/checkpoints/v000007") ||
		!strings.Contains(err.Error(), "the weights the engine started with") {
		t.Fatalf("unmapped volume: %v", err)
	}
}

// A name already taken (an earlier run's adapter of the same version) is
// unloaded and loaded again from the new folder, on both engines.
func TestTakenNameIsReloaded(t *testing.T) {
	root := t.TempDir()
	dir := writeVersion(t, root, 3, true)
	v := &fakeengine.VLLM{Loaded: map[string]string{"swerl-v000003": "/old/run/checkpoints/v000003"}}
	g := &fakeengine.SGLang{Loaded: map[string]string{"swerl-v000003": "/old/run/checkpoints/v000003"}}
	tv, tg := httptest.NewServer(v), httptest.NewServer(g)
	defer tv.Close()
	defer tg.Close()
	s, _ := newSyncer(t, Config{Engines: []Engine{{URL: tv.URL, Kind: engineapi.VLLM}, {URL: tg.URL, Kind: engineapi.SGLang}}})
	if err := s.Push(context.Background(), 3, dir); err != nil {
		t.Fatal(err)
	}
	if v.Loaded["swerl-v000003"] != dir || g.Loaded["swerl-v000003"] != dir {
		t.Fatalf("vllm %v sglang %v", v.Loaded, g.Loaded)
	}
	if len(v.Calls) != 3 || len(g.Calls) != 3 {
		t.Fatalf("want load, unload, load: %v / %v", v.Calls, g.Calls)
	}
}

// SGLang: adapters through /load_lora_adapter and /unload_lora_adapter,
// full weights through /update_weights_from_disk; "success": false is a
// refusal whatever the status.
func TestSGLang(t *testing.T) {
	root := t.TempDir()
	g := &fakeengine.SGLang{}
	ts := serveTest(t, g)
	s, got := newSyncer(t, Config{Engines: []Engine{{URL: ts.URL, Kind: engineapi.SGLang}}, Keep: 1})
	for v := int64(1); v <= 2; v++ {
		if err := s.Push(context.Background(), v, writeVersion(t, root, v, true)); err != nil {
			t.Fatal(err)
		}
	}
	if len(g.Loaded) != 1 || g.Loaded["swerl-v000002"] == "" {
		t.Fatalf("loaded %v", g.Loaded)
	}
	if g.Calls[2].Path != "/unload_lora_adapter" || g.Calls[2].Body["lora_name"] != "swerl-v000001" {
		t.Fatalf("calls %v", g.Calls)
	}
	full := writeVersion(t, root, 3, false)
	if err := s.Push(context.Background(), 3, full); err != nil {
		t.Fatal(err)
	}
	last := g.Calls[len(g.Calls)-1]
	if last.Path != "/update_weights_from_disk" || last.Body["model_path"] != full || last.Body["weight_version"] != "swerl-v000003" || g.Model != full {
		t.Fatalf("full weights: %+v", last)
	}
	if (*got)[len(*got)-1].v != (engineapi.ServedVersion{Version: 3}) {
		t.Fatalf("hook %+v", *got)
	}
	g.Fail = func(int, fakeengine.Call) (int, map[string]any) {
		return 200, map[string]any{"success": false, "message": "Failed to get weights iterator: shape mismatch", "num_paused_requests": 0}
	}
	s.cfg.Attempts = 2
	if err := s.Push(context.Background(), 4, writeVersion(t, root, 4, false)); err == nil || !strings.Contains(err.Error(), "shape mismatch") ||
		!strings.Contains(err.Error(), "rollouts keep version 3") {
		t.Fatalf("success false: %v", err)
	}
}

// vLLM cannot take full weights at run time: nothing is sent, nothing
// fails, and the rollouts keep the engine's own weights.
func TestVLLMFullWeightsAreNotPushed(t *testing.T) {
	srv := &fakeengine.VLLM{}
	ts := serveTest(t, srv)
	s, got := newSyncer(t, Config{Engines: []Engine{{URL: ts.URL, Kind: engineapi.VLLM}}})
	if err := s.Push(context.Background(), 1, writeVersion(t, t.TempDir(), 1, false)); err != nil {
		t.Fatal(err)
	}
	if len(srv.Calls) != 0 || len(*got) != 0 {
		t.Fatalf("calls %v hook %v", srv.Calls, *got)
	}
}

// A version the engines could not read (a file 0600) or that is no model
// is refused before any request.
func TestPushChecksTheFolder(t *testing.T) {
	root := t.TempDir()
	srv := &fakeengine.VLLM{}
	ts := serveTest(t, srv)
	s, _ := newSyncer(t, Config{Engines: []Engine{{URL: ts.URL, Kind: engineapi.VLLM}}})
	dir := writeVersion(t, root, 1, true)
	os.Chmod(filepath.Join(dir, "adapter_model.safetensors"), 0o600)
	if err := s.Push(context.Background(), 1, dir); err == nil || !strings.Contains(err.Error(), "adapter_model.safetensors has mode 0600") {
		t.Fatalf("unreadable: %v", err)
	}
	os.Chmod(filepath.Join(dir, "adapter_model.safetensors"), 0o644)
	os.Chmod(dir, 0o700)
	if err := s.Push(context.Background(), 1, dir); err == nil || !strings.Contains(err.Error(), "folder") {
		t.Fatalf("unreadable folder: %v", err)
	}
	if err := s.Push(context.Background(), 2, t.TempDir()); err == nil || !strings.Contains(err.Error(), "neither adapter_config.json nor config.json") {
		t.Fatalf("empty folder: %v", err)
	}
	if len(srv.Calls) != 0 {
		t.Fatalf("calls %v", srv.Calls)
	}
	// An adapter in the version's adapter/ folder is found there.
	sub := filepath.Join(writeVersion(t, root, 3, false), "adapter")
	os.Mkdir(sub, 0o755)
	os.WriteFile(filepath.Join(sub, "adapter_config.json"), []byte("{}"), 0o644)
	if err := s.Push(context.Background(), 3, filepath.Dir(sub)); err != nil || srv.Loaded["swerl-v000003"] != sub {
		t.Fatalf("adapter/: %v %v", err, srv.Loaded)
	}
}

func TestPathMap(t *testing.T) {
	s, err := New(Config{Engines: []Engine{{URL: "http://x", Kind: engineapi.VLLM}}, PathMap: "/data/out=s3://bucket/run1/"})
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{"/data/out/checkpoints/v000001": "s3://bucket/run1/checkpoints/v000001",
		"/data/outer/v1": "/data/outer/v1", "/other": "/other"} {
		if got := s.mapPath(in); got != want {
			t.Errorf("mapPath(%q) = %q, want %q", in, got, want)
		}
	}
	for _, bad := range []string{"nomap", "=x", "x="} {
		if _, err := New(Config{Engines: []Engine{{URL: "http://x", Kind: engineapi.VLLM}}, PathMap: bad}); err == nil {
			t.Errorf("path map %q accepted", bad)
		}
	}
}

// Message reads every engine's answer shape; outside bytes never panic.
func FuzzMessage(f *testing.F) {
	for _, s := range []string{`{"object":"error","message":"m1","type":"x","code":400}`, `{"error":{"message":"m2"}}`,
		`{"success":false,"error_message":"m3"}`, `{"success":false,"message":"m4"}`, `{"detail":[{"msg":"m5"}]}`,
		`Success: LoRA adapter 'a' added successfully.`, `{"error":"flat"}`, "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := Message(b)
		if len(m) > 310 {
			t.Fatalf("message of %d bytes", len(m))
		}
		_ = failed(b)
	})
}

func TestMessage(t *testing.T) {
	for body, want := range map[string]string{`{"object":"error","message":"m1","type":"x","code":400}`: "m1", `{"error":{"message":"m2"}}`: "m2",
		`{"success":false,"error_message":"m3"}`: "m3", `{"success":false,"message":"m4"}`: "m4", ` plain `: "plain"} {
		if got := Message([]byte(body)); got != want {
			t.Errorf("Message(%s) = %q, want %q", body, got, want)
		}
	}
}

// A syncer that starts against an engine holding an earlier process's
// adapters (a resumed run) counts them in its window and unloads them in
// turn; adapters of other names are not touched.
func TestAdoptsTheEnginesAdapters(t *testing.T) {
	root := t.TempDir()
	srv := &fakeengine.VLLM{Loaded: map[string]string{"swerl-v000003": "/old/v000003", "swerl-v000004": "/old/v000004", "my-adapter": "/x", "swerl-v7": "/y"}}
	ts := serveTest(t, srv)
	s, _ := newSyncer(t, Config{Engines: []Engine{{URL: ts.URL, Kind: engineapi.VLLM}}, Keep: 2})
	if err := s.Push(context.Background(), 5, writeVersion(t, root, 5, true)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range srv.Loaded {
		names = append(names, n)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"my-adapter", "swerl-v000004", "swerl-v000005", "swerl-v7"}) {
		t.Fatalf("loaded %v", names)
	}
	// The version it holds already (resume): loaded again from its folder.
	s2, _ := newSyncer(t, Config{Engines: []Engine{{URL: ts.URL, Kind: engineapi.VLLM}}, Keep: 2})
	if err := s2.Push(context.Background(), 5, filepath.Join(root, "checkpoints", "v000005")); err != nil {
		t.Fatal(err)
	}
	if len(srv.Loaded) != 4 {
		t.Fatalf("loaded %v", srv.Loaded)
	}
}

func TestParseEngines(t *testing.T) {
	es, err := ParseEngines(" http://a:8000/v1, https://b:9000 ,", engineapi.SGLang)
	if err != nil || len(es) != 2 || es[0].URL != "http://a:8000/v1" || es[1].URL != "https://b:9000" || es[1].Kind != engineapi.SGLang {
		t.Fatalf("%+v, %v", es, err)
	}
	for _, tc := range []struct {
		list string
		kind engineapi.Kind
		want string
	}{
		{"http://a:8000", "tgi", `kind "tgi"`},
		{"a:8000", engineapi.VLLM, `"a:8000" is not`},
		{"http://a:8000,ftp://b", engineapi.VLLM, `"ftp://b" is not`},
		{" , ", engineapi.VLLM, "no server URL"},
	} {
		if _, err := ParseEngines(tc.list, tc.kind); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %q: %v, want %q", tc.list, tc.kind, err, tc.want)
		}
	}
}

// OnPushed hears, after a push that loaded the version somewhere, every
// engine that holds it: not one that refused it, and nothing for a push
// that loaded nothing new.
func TestOnPushedNamesTheEnginesThatHoldTheVersion(t *testing.T) {
	root := t.TempDir()
	good, bad := &fakeengine.VLLM{}, &fakeengine.VLLM{}
	bad.Fail = func(int, fakeengine.Call) (int, string) { return 400, "no" }
	tg, tb := httptest.NewServer(good), httptest.NewServer(bad)
	defer tg.Close()
	defer tb.Close()
	type pushed struct {
		v       int64
		adapter string
		engines []string
	}
	var got []pushed
	s, err := New(Config{Engines: []Engine{{URL: tg.URL + "/v1", Kind: engineapi.VLLM}, {URL: tb.URL, Kind: engineapi.VLLM}}, Attempts: 1, Backoff: 1,
		OnPushed: func(v int64, adapter string, engines []string) { got = append(got, pushed{v, adapter, engines}) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Push(context.Background(), 1, writeVersion(t, root, 1, true)); err == nil {
		t.Fatal("one engine refused: want an error")
	}
	bad.Fail = nil
	if err := s.Push(context.Background(), 1, filepath.Join(root, "checkpoints", "v000001")); err != nil {
		t.Fatal(err)
	}
	if err := s.Push(context.Background(), 1, filepath.Join(root, "checkpoints", "v000001")); err != nil { // both hold it: nothing new
		t.Fatal(err)
	}
	want := []pushed{{1, "swerl-v000001", []string{tg.URL}}, {1, "swerl-v000001", []string{tg.URL, tb.URL}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("OnPushed heard %+v, want %+v", got, want)
	}
}

// An engine marked lost (a restarted process: nothing of what it held)
// gets, from Table.Restore, the full-weight version its adapters build on
// and then the newest adapter pushed; one still listing the adapter gets
// nothing; one that does not answer is an error that keeps it lost.
func TestRestoreLoadsWhatTheEngineLost(t *testing.T) {
	root := t.TempDir()
	g := &fakeengine.SGLang{}
	ts := serveTest(t, g)
	table := NewTable()
	s, _ := newSyncer(t, Config{Engines: []Engine{{URL: ts.URL, Kind: engineapi.SGLang}}, Table: table})
	ctx := context.Background()
	for _, p := range []struct {
		v       int64
		adapter bool
	}{{1, false}, {2, true}, {3, true}} {
		if err := s.Push(ctx, p.v, writeVersion(t, root, p.v, p.adapter)); err != nil {
			t.Fatal(err)
		}
	}
	if table.Lost(ts.URL) || table.Restore(ctx, ts.URL) != nil {
		t.Fatal("an engine that lost nothing is restored without a call")
	}
	calls := len(g.Calls)
	// The process restarts: nothing loaded.
	g.Mu.Lock()
	g.Loaded, g.Model = nil, ""
	g.Mu.Unlock()
	if !table.Lose(ts.URL + "/v1") {
		t.Fatal("Lose with a syncer on the table reports false")
	}
	if err := table.Restore(ctx, ts.URL); err != nil {
		t.Fatal(err)
	}
	var seq []string
	for _, c := range g.Calls[calls:] {
		seq = append(seq, c.Path)
	}
	if want := []string{"/update_weights_from_disk", "/load_lora_adapter"}; !slices.Equal(seq, want) {
		t.Fatalf("restore sent %v, want %v", seq, want)
	}
	if g.Model != filepath.Join(root, "checkpoints", "v000001") || g.Loaded["swerl-v000003"] != filepath.Join(root, "checkpoints", "v000003") {
		t.Fatalf("engine holds model %q, adapters %v", g.Model, g.Loaded)
	}
	if h, _ := table.Get(ts.URL); table.Lost(ts.URL) || h.Version != 3 {
		t.Fatalf("after restore: held %+v, lost %v", h, table.Lost(ts.URL))
	}

	// vLLM that still lists the adapter (a dropped connection): no load.
	v := &fakeengine.VLLM{}
	tv := httptest.NewServer(v)
	tvt := NewTable()
	sv, _ := newSyncer(t, Config{Engines: []Engine{{URL: tv.URL, Kind: engineapi.VLLM}}, Table: tvt})
	if err := sv.Push(ctx, 2, filepath.Join(root, "checkpoints", "v000002")); err != nil {
		t.Fatal(err)
	}
	tvt.Lose(tv.URL)
	if err := tvt.Restore(ctx, tv.URL); err != nil || tvt.Lost(tv.URL) || len(v.Calls) != 1 {
		t.Fatalf("restore of an engine that lists the adapter: %v, lost %v, %d calls", err, tvt.Lost(tv.URL), len(v.Calls))
	}
	// Down: an error, and it stays lost.
	tv.Close()
	tvt.Lose(tv.URL)
	if err := tvt.Restore(ctx, tv.URL); err == nil || !tvt.Lost(tv.URL) || !strings.Contains(err.Error(), "does not answer") {
		t.Fatalf("restore of a down engine: %v, lost %v", err, tvt.Lost(tv.URL))
	}
	// Without a syncer, Lose does nothing.
	bare := NewTable()
	if bare.Lose(tv.URL) || bare.Lost(tv.URL) || bare.Restore(ctx, tv.URL) != nil {
		t.Fatal("a table without a syncer marks an engine lost")
	}
}

// serveTest serves h on loopback until the test ends.
func serveTest(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}
