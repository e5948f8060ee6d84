package train_test

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"swerl/internal/engineapi"
	"swerl/internal/testenv"
	"swerl/pipelines/train"
	"swerl/schemas"
	"swerl/sinks/kafkaio"
	"swerl/sinks/weightsync"
)

// FollowWeights reads the weights topic from its start (announcements
// made before it started count) and keeps reading: per engine, the newest
// adapter an announcement names it as holding. Publish-time announcements
// (no engines), full-weight versions and records that do not decode
// change nothing.
func TestFollowWeightsRecordsTheEnginesAnnounced(t *testing.T) {
	br, err := kafkaio.StartBroker(kafkaio.BrokerOptions{Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	kc := br.Config("")
	w, err := kafkaio.NewWriter(kafkaio.WriteConfig{Config: kc, Topic: kc.Topic(kafkaio.Weights)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const a, b = "http://127.0.0.1:1", "http://127.0.0.1:2"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	announce := func(v schemas.WeightVersion) {
		t.Helper()
		val, err := schemas.Encode(&v)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteMessages(ctx, kafka.Message{Key: []byte(engineapi.AdapterName(v.Version)), Value: val}); err != nil {
			t.Fatal(err)
		}
	}
	lora := func(v int64, engines ...string) schemas.WeightVersion {
		return schemas.WeightVersion{Version: v, Parent: v - 1, Adapter: engineapi.AdapterName(v), Engines: engines}
	}
	announce(lora(1, a+"/v1"))
	announce(lora(2))                                                            // published, not pushed yet
	announce(lora(2, a, b))                                                      // pushed to both
	announce(schemas.WeightVersion{Version: 3, Parent: 2, Engines: []string{b}}) // full weights: nothing to name
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("junk"), Value: []byte("{not json")}); err != nil {
		t.Fatal(err)
	}
	ann := weightsync.NewTable()
	fctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- train.FollowWeights(fctx, kc, ann, nil) }()
	holds := func(engine string, v int64) func() bool {
		return func() bool {
			sv, ok := ann.Announced(engine)
			return ok && sv.Version == v && sv.Adapter == engineapi.AdapterName(v)
		}
	}
	testenv.Eventually(t, 30*time.Second, "a and b hold v2", func() bool { return holds(a, 2)() && holds(b, 2)() })
	announce(lora(4, b+"/v1"))
	testenv.Eventually(t, 30*time.Second, "b holds v4, announced after the follower started", holds(b, 4))
	if sv, _ := ann.Announced(a); !holds(a, 2)() {
		t.Errorf("a holds %+v, want v2: v4 was announced for b only", sv)
	}
	stop()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("FollowWeights did not return after its context ended")
	}
}
