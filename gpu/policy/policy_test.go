package policy

import (
	"context"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/gpu/hf"
	"swerl/gpu/modeldir"
	"swerl/gpu/tokenizer"
	"swerl/internal/testenv"
	"swerl/schemas"
	"swerl/sinks/checkpoint"
	"swerl/transforms/rollout"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// openTiny opens a policy with options o over a new tiny model (seed 5).
func openTiny(t *testing.T, o Options) *Policy {
	t.Helper()
	dir := t.TempDir()
	if _, err := modeldir.Init(dir, "tiny", 5); err != nil {
		t.Fatal(err)
	}
	return openQuiet(t, dir, o)
}

// openQuiet opens the policy at path with options o, logging nowhere,
// and closes it when the test ends.
func openQuiet(t *testing.T, path string, o Options) *Policy {
	t.Helper()
	o.Log = quiet()
	pol, err := Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pol.Close() })
	return pol
}

// publisher returns a function that publishes version v to the checkpoint
// store at root: a tiny model of seed seed+v.
func publisher(t *testing.T, root string, seed uint64) func(v int64) {
	st, err := checkpoint.Open(checkpoint.Config{Dir: root, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return func(v int64) {
		t.Helper()
		if _, err := st.Publish(schemas.WeightVersion{Version: v, Step: v}, func(d string) error {
			_, err := modeldir.Init(d, "tiny", seed+uint64(v))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCompleteMatchesTrainerLogProbs(t *testing.T) {
	dir := t.TempDir()
	if _, err := modeldir.Init(dir, "tiny", 5); err != nil {
		t.Fatal(err)
	}
	pol, err := rollout.Open("model:" + dir + "?max_seq=256&max_tokens=12")
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	if pol.Version() != -1 {
		t.Errorf("Version() = %d for a plain model directory, want -1", pol.Version())
	}
	req := rollout.Request{InstanceID: "o/r#1", System: "be brief", Prompt: "fix the bug", N: 3, Seed: 11}
	resp, err := pol.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Completions) != 3 || resp.PolicyVersion != -1 {
		t.Fatalf("got %d completions, version %d", len(resp.Completions), resp.PolicyVersion)
	}
	mp, err := modeldir.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := mp.Tokenizer.Chat.Render(msgList{{"system", "be brief"}, {"user", "fix the bug"}}.msgs(), true)
	c0 := resp.Completions[0]
	if got, _ := mp.Tokenizer.Decode(c0.PromptTokens); got != want {
		t.Errorf("prompt tokens decode to %q, want the rendered chat %q", got, want)
	}
	tr, err := gpu.NewTrainer(mp.Model, cpu.New(), gpu.TrainConfig{MaxBatch: 3, MaxSeq: 256})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []gpu.Sequence
	for _, c := range resp.Completions {
		if len(c.Tokens) != len(c.LogProbs) || len(c.Tokens) == 0 || len(c.Tokens) > 12 {
			t.Fatalf("completion has %d tokens and %d log-probs", len(c.Tokens), len(c.LogProbs))
		}
		seqs = append(seqs, gpu.Sequence{Prompt: c.PromptTokens, Completion: c.Tokens})
	}
	lps, err := tr.LogProbs(seqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range resp.Completions {
		for k := range c.LogProbs {
			if d := math.Abs(float64(c.LogProbs[k] - lps[i][k])); d > 1e-3 {
				t.Fatalf("completion %d token %d: sampler log-prob %v, trainer %v", i, k, c.LogProbs[k], lps[i][k])
			}
		}
	}
	// Same seed, same completions; another seed, (almost surely) others.
	again, err := pol.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for i := range again.Completions {
		if !slices.Equal(again.Completions[i].Tokens, resp.Completions[i].Tokens) {
			t.Fatalf("completion %d differs for the same seed", i)
		}
	}
	if slices.Equal(resp.Completions[0].Tokens, resp.Completions[1].Tokens) && slices.Equal(resp.Completions[1].Tokens, resp.Completions[2].Tokens) {
		t.Error("three seeds gave three equal completions")
	}
}

type tokenizerMsg = [2]string

type tokenizerMessage = tokenizer.Message

type msgList []tokenizerMsg

func (l msgList) msgs() []tokenizerMessage {
	var out []tokenizerMessage
	for _, m := range l {
		out = append(out, tokenizerMessage{Role: m[0], Content: m[1]})
	}
	return out
}

func TestPromptTooLong(t *testing.T) {
	pol := openTiny(t, Options{MaxSeq: 32})
	_, err := pol.Complete(context.Background(), rollout.Request{InstanceID: "x#1", Prompt: strings.Repeat("zq ", 40)})
	if err == nil || !strings.Contains(err.Error(), "x#1") || !strings.Contains(err.Error(), "prompt tokens") {
		t.Fatalf("err = %v, want a too-long error naming the instance", err)
	}
}

func TestReloadNewVersion(t *testing.T) {
	root := t.TempDir()
	publish := publisher(t, root, 100)
	publish(0)
	pol := openQuiet(t, root, Options{Poll: 10 * time.Millisecond, MaxSeq: 128, MaxTokens: 8})
	req := rollout.Request{Prompt: "hello", N: 1, Seed: 3, Temperature: 1e-6}
	r0, err := pol.Complete(context.Background(), req)
	if err != nil || r0.PolicyVersion != 0 {
		t.Fatalf("version %d, err %v; want 0", r0.PolicyVersion, err)
	}
	publish(1)
	testenv.Eventually(t, time.Minute, "the policy picking up version 1", func() bool { return pol.Version() == 1 })
	r1, err := pol.Complete(context.Background(), req)
	if err != nil || r1.PolicyVersion != 1 {
		t.Fatalf("version %d, err %v; want 1", r1.PolicyVersion, err)
	}
	if slices.Equal(r0.Completions[0].LogProbs, r1.Completions[0].LogProbs) {
		t.Error("new weights gave identical log-probs")
	}
}

func TestParseSpec(t *testing.T) {
	path, o, err := ParseSpec("model:/a/b?max_seq=64&poll=0&device=cpu&temperature=0.5")
	if err != nil || path != "/a/b" || o.MaxSeq != 64 || o.Poll != 0 || o.Device != "cpu" || o.Temperature != 0.5 {
		t.Fatalf("%q %+v %v", path, o, err)
	}
	if _, o, err := ParseSpec("model:/a/b"); err != nil || o.Poll != DefaultPoll {
		t.Errorf("a spec without poll=: Poll %v, %v; want DefaultPoll", o.Poll, err)
	}
	for _, bad := range []string{"model:", "file:/x", "model:/x?max_seq=-1", "model:/x?poll=soon", "model:/x?colour=red"} {
		if _, _, err := ParseSpec(bad); err == nil {
			t.Errorf("ParseSpec(%q) accepted", bad)
		}
	}
	if _, err := Open(t.TempDir(), Options{Log: quiet()}); err == nil {
		t.Error("opened an empty directory")
	}
}

// A version swapped in while a request is in flight does not touch it:
// the request finishes every completion on the weights it started with
// and reports that version; the next request gets the new one.
func TestReloadDuringRequest(t *testing.T) {
	root := t.TempDir()
	publish := publisher(t, root, 200)
	publish(0)
	pol := openQuiet(t, root, Options{MaxSeq: 128, MaxTokens: 6})
	req := rollout.Request{Prompt: "hello", N: 4, Seed: 9}
	ref, err := pol.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	publish(1)
	pol.afterCompletion = func(i int) {
		if i == 0 {
			if ok, err := pol.Reload(); !ok || err != nil {
				t.Errorf("Reload = %v, %v", ok, err)
			}
		}
	}
	got, err := pol.Complete(context.Background(), req)
	pol.afterCompletion = nil
	if err != nil {
		t.Fatal(err)
	}
	if got.PolicyVersion != 0 || pol.Version() != 1 {
		t.Fatalf("in-flight request reports v%d (policy now v%d), want v0 (v1)", got.PolicyVersion, pol.Version())
	}
	for i := range ref.Completions {
		if !slices.Equal(got.Completions[i].LogProbs, ref.Completions[i].LogProbs) {
			t.Fatalf("completion %d changed weights mid-request", i)
		}
	}
	next, err := pol.Complete(context.Background(), req)
	if err != nil || next.PolicyVersion != 1 || slices.Equal(next.Completions[0].LogProbs, ref.Completions[0].LogProbs) {
		t.Fatalf("next request: v%d, %v", next.PolicyVersion, err)
	}
}

// TestConcurrentRequestsBatched: the completions of concurrent requests
// are decoded together and each request gets exactly the completions it
// gets alone; a cancelled request returns its context's error and leaves
// the policy serving.
func TestConcurrentRequestsBatched(t *testing.T) {
	pol := openTiny(t, Options{MaxSeq: 128, MaxTokens: 10, Batch: 8})
	var err error
	reqs := []rollout.Request{
		{InstanceID: "a", Prompt: "fix the bug", N: 3, Seed: 1},
		{InstanceID: "b", Prompt: "add a test", N: 3, Seed: 2},
		{InstanceID: "c", Prompt: "fix the bug", N: 2, Seed: 3, Temperature: 0.5},
		{InstanceID: "d", Prompt: "rename it", N: 4, Seed: 4},
	}
	alone := make([]rollout.Response, len(reqs))
	for i, r := range reqs {
		if alone[i], err = pol.Complete(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	// Hold the backend until every request has queued its completions,
	// so that they are all in flight together (12: more than the 8 slots).
	st := pol.cur.Load()
	var most int
	pol.run.Lock()
	got := make([]rollout.Response, len(reqs))
	errs := make(chan error, len(reqs))
	for i, r := range reqs {
		go func() {
			var err error
			got[i], err = pol.Complete(context.Background(), r)
			errs <- err
		}()
	}
	testenv.Eventually(t, time.Minute, "12 completions queued", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		most = st.sampler.Pending()
		return most == 12
	})
	pol.run.Unlock()
	for range reqs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range reqs {
		if len(got[i].Completions) != reqs[i].N {
			t.Fatalf("request %d: %d completions", i, len(got[i].Completions))
		}
		for k, c := range got[i].Completions {
			a := alone[i].Completions[k]
			if !slices.Equal(c.Tokens, a.Tokens) || !slices.Equal(c.LogProbs, a.LogProbs) || c.Text != a.Text {
				t.Errorf("request %d completion %d batched %v, alone %v", i, k, c.Tokens, a.Tokens)
			}
		}
	}
	// Cancellation: the request ends with its context's error, its
	// completions leave the batch, and the next request is served.
	ctx, cancel := context.WithCancel(context.Background())
	pol.afterCompletion = func(int) { cancel() }
	_, err = pol.Complete(ctx, rollout.Request{Prompt: "long", N: 4, Seed: 5, MaxTokens: 100})
	pol.afterCompletion = nil
	if err != context.Canceled {
		t.Fatalf("cancelled request: %v", err)
	}
	st.mu.Lock()
	left := len(st.owner)
	st.mu.Unlock()
	if left != 0 {
		t.Errorf("%d completions of the cancelled request still owned", left)
	}
	again, err := pol.Complete(context.Background(), reqs[0])
	if err != nil || !slices.Equal(again.Completions[0].Tokens, alone[0].Completions[0].Tokens) {
		t.Fatalf("after a cancelled request: %v", err)
	}
}

// OnToken reports every token of every completion, in order, with its
// log-probability and version, as the steps sample them: the first one
// long before the request returns.
func TestOnTokenReportsEachToken(t *testing.T) {
	pol := openTiny(t, Options{MaxSeq: 256, MaxTokens: 64, Batch: 4})
	// Token by token: the first report comes in the first half of the
	// answer's time. A whole answer takes milliseconds, so a loaded
	// machine can stall one run: three tries before failing.
	for try := 1; ; try++ {
		var got [2][]Token
		var first time.Time
		t0 := time.Now()
		resp, err := pol.CompleteWith(context.Background(), rollout.Request{InstanceID: "x", Prompt: "fix the bug", N: 2, Seed: 9, Temperature: 1},
			Params{OnToken: func(tk Token) {
				if first.IsZero() {
					first = time.Now()
				}
				got[tk.Completion] = append(got[tk.Completion], tk)
			}})
		if err != nil {
			t.Fatal(err)
		}
		total := time.Since(t0)
		for i, c := range resp.Completions {
			if len(got[i]) != len(c.Tokens) {
				t.Fatalf("completion %d: %d tokens reported, %d sampled", i, len(got[i]), len(c.Tokens))
			}
			for j, tk := range got[i] {
				if tk.ID != c.Tokens[j] || tk.LogProb != c.LogProbs[j] || tk.Version != resp.PolicyVersion {
					t.Fatalf("completion %d token %d: reported %+v, sampled %d (%g) of v%d", i, j, tk, c.Tokens[j], c.LogProbs[j], resp.PolicyVersion)
				}
			}
		}
		n := max(len(got[0]), len(got[1]))
		if ttf := first.Sub(t0); n < 8 || ttf <= total/2 {
			break
		} else if try == 3 {
			t.Errorf("first token reported after %v of %v (%d tokens), three times", ttf, total, n)
			break
		}
	}
	// A request without OnToken leaves nothing watched.
	if len(pol.cur.Load().watch) != 0 {
		t.Errorf("%d completions still watched", len(pol.cur.Load().watch))
	}
}

// A bf16 policy serves the weights rounded to bfloat16: its log-probs
// differ from the float32 trainer's by a small, real mismatch, and equal
// those of a trainer holding the rounded weights.
func TestBF16WeightsMismatch(t *testing.T) {
	dir := t.TempDir()
	if _, err := modeldir.Init(dir, "tiny", 5); err != nil {
		t.Fatal(err)
	}
	pol, err := rollout.Open("model:" + dir + "?max_seq=256&max_tokens=16&bf16=true")
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	resp, err := pol.Complete(context.Background(), rollout.Request{InstanceID: "o/r#1", Prompt: "fix the bug", N: 4, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	mp, err := modeldir.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []gpu.Sequence
	for _, c := range resp.Completions {
		seqs = append(seqs, gpu.Sequence{Prompt: c.PromptTokens, Completion: c.Tokens})
	}
	logProbs := func() [][]float32 {
		tr, err := gpu.NewTrainer(mp.Model, cpu.New(), gpu.TrainConfig{MaxBatch: 4, MaxSeq: 256})
		if err != nil {
			t.Fatal(err)
		}
		lp, err := tr.LogProbs(seqs)
		if err != nil {
			t.Fatal(err)
		}
		return lp
	}
	maxDiff := func(lp [][]float32) float64 {
		var d float64
		for i, c := range resp.Completions {
			for k := range c.LogProbs {
				d = math.Max(d, math.Abs(float64(c.LogProbs[k]-lp[i][k])))
			}
		}
		return d
	}
	f32 := maxDiff(logProbs())
	for _, ten := range mp.Model.Tensors() {
		for i, x := range ten.Data {
			ten.Data[i] = hf.BF16ToFloat32(hf.Float32ToBF16(x))
		}
	}
	rounded := maxDiff(logProbs())
	t.Logf("max |Δ ln π|: against float32 %.3g, against the rounded weights %.3g", f32, rounded)
	if f32 < 1e-4 || rounded > 1e-4 {
		t.Errorf("max |Δ ln π| %v against float32 (want a real mismatch ≥ 1e-4) and %v against bf16 weights (want float error)", f32, rounded)
	}
}
