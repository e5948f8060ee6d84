package weightsync

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"

	"swerl/internal/engineapi"
	"swerl/internal/fakeengine"
	"swerl/schemas"
)

// A separate learner's publisher announces each version naming its
// adapter, pushes it in the background, and announces it again naming the
// engines that loaded it; Start pushes the start version only when nothing
// was published, and a pushed version the index does not list is not
// announced.
func TestPublisherAnnouncesThenPushes(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, 0, true) // a Start(0) that pushed would leave the engine on v0
	writeVersion(t, root, 1, true)
	writeVersion(t, root, 2, true)
	srv := &fakeengine.VLLM{}
	ts := serveTest(t, srv)
	var mu sync.Mutex
	var got []schemas.WeightVersion
	announce := func(_ context.Context, v schemas.WeightVersion) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, schemas.WeightVersion{Version: v.Version, Adapter: v.Adapter, Engines: v.Engines})
		return nil
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	newPub := func(withAnnounce bool) (*Publisher, *Syncer) {
		s, err := New(Config{Engines: []Engine{{URL: ts.URL + "/v1", Kind: engineapi.VLLM}}, Attempts: 1, Backoff: 1, Log: quiet})
		if err != nil {
			t.Fatal(err)
		}
		cfg := PublisherConfig{Syncer: s, Out: root, LoRA: true, Log: quiet}
		if withAnnounce {
			cfg.Announce = announce
		}
		p, err := NewPublisher(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p, s
	}

	p, s := newPub(true)
	if err := p.Publish(context.Background(), schemas.WeightVersion{Version: 1}); err != nil {
		t.Fatal(err)
	}
	p.Start(0) // a version was published: nothing more to push
	if err := p.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []schemas.WeightVersion{{Version: 1, Adapter: "swerl-v000001"}, {Version: 1, Adapter: "swerl-v000001", Engines: []string{ts.URL}}}
	mu.Lock()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("announced\n%+v\nwant\n%+v", got, want)
	}
	got = nil
	mu.Unlock()
	if v, ok := s.Held(ts.URL); !ok || v.Version != 1 {
		t.Errorf("the engine holds %+v, %v; want v1", v, ok)
	}

	// A resumed learner publishes nothing at start: Start pushes its
	// version; the index lists none here, so it is not announced again.
	p, s = newPub(true)
	p.Start(2)
	if err := p.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Held(ts.URL); !ok || v.Version != 2 {
		t.Errorf("after Start(2) the engine holds %+v, %v; want v2", v, ok)
	}
	mu.Lock()
	if len(got) != 0 {
		t.Errorf("a version the index does not list was announced: %+v", got)
	}
	mu.Unlock()

	// Offline (no topic), and without engines: Publish only pushes, or
	// does nothing.
	p, _ = newPub(false)
	if err := p.Publish(context.Background(), schemas.WeightVersion{Version: 1}); err != nil || !p.Pushing() {
		t.Fatalf("offline publish: %v, pushing %v", err, p.Pushing())
	}
	none, err := NewPublisher(context.Background(), PublisherConfig{Out: root})
	if err != nil || none.Pushing() || none.Publish(context.Background(), schemas.WeightVersion{Version: 3}) != nil || none.Wait(context.Background()) != nil {
		t.Fatalf("a publisher without engines or topic: %v", err)
	}
}
