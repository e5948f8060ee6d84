package train

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"swerl/internal/engineapi"
	"swerl/internal/testenv"
	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/kafkaio"
	"swerl/transforms/scoring"
)

// A rollout stage on a worker that opens its own policy (a remote
// runner's worker, where the run's process did not open it) reads the
// weights topic itself: an engine that lists no adapters (older SGLang)
// is asked for the adapter the learner announced it holds, and the
// samples carry that version.
func TestRemoteRolloutWorkerFollowsAnnouncements(t *testing.T) {
	br, err := kafkaio.StartBroker(kafkaio.BrokerOptions{Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	kc := br.Config("")

	var mu sync.Mutex
	var named []string
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"data": []map[string]string{{"id": "m"}}})
	})
	mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req engineapi.ChatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.N == nil {
			http.Error(w, "bad request", 400)
			return
		}
		mu.Lock()
		named = append(named, req.Model)
		mu.Unlock()
		var choices []map[string]any
		for i := range *req.N {
			choices = append(choices, map[string]any{"index": i, "finish_reason": "stop", "message": map[string]string{"role": "assistant", "content": "no edit"}})
		}
		json.NewEncoder(w).Encode(map[string]any{"model": req.Model, "choices": choices})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	engine := "http://" + ln.Addr().String() + "/v1"

	w, err := kafkaio.NewWriter(kafkaio.WriteConfig{Config: kc, Topic: kc.Topic(kafkaio.Weights)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	v, err := schemas.Encode(&schemas.WeightVersion{Version: 3, Parent: 2, Adapter: engineapi.AdapterName(3), Engines: []string{engineapi.BaseURL(engine)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte(engineapi.AdapterName(3)), Value: v}); err != nil {
		t.Fatal(err)
	}

	// The DoFn as a worker receives it: Beam carries its exported fields.
	sent, err := json.Marshal(&rolloutFn{RunID: newRunID(), Policy: engine + "?follow=true&health=50ms&model=m",
		Spec: scoring.Spec{GroupSize: 2}, Concurrency: 1, Weights: kc})
	if err != nil {
		t.Fatal(err)
	}
	var f rolloutFn
	if err := json.Unmarshal(sent, &f); err != nil {
		t.Fatal(err)
	}
	defer dropRun(f.RunID)
	if err := f.Setup(); err != nil {
		t.Fatal(err)
	}
	defer f.Teardown()
	if !f.own || f.unfollow == nil {
		t.Fatalf("the worker's rollout stage did not open its own policy (own %v) or follow the topic", f.own)
	}
	in := traintest.Instance(0)
	var last rolled
	testenv.Eventually(t, 30*time.Second, "a request names the announced adapter", func() bool {
		last = f.complete(ctx, request{Source: "test:1"}, &in)
		if last.dead != nil {
			t.Fatalf("dead-lettered: %+v", *last.dead)
		}
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(named, engineapi.AdapterName(3))
	})
	for _, m := range last.part.Members {
		if m.Sample.PolicyVersion != 3 {
			t.Fatalf("a sample asked of %s carries policy_version %d, want 3", engineapi.AdapterName(3), m.Sample.PolicyVersion)
		}
	}
}
