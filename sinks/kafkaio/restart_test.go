package kafkaio

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"swerl/internal/testenv"
	"swerl/sinks/kafkaio/kafkatest"
)

func init() {
	register.Function1x1[Message, Message](relabelWithOrigin)
}

func relabelWithOrigin(m Message) Message {
	out := relabel(m)
	out.Origin = m.Source()
	return out
}

// ackedPipeline reads "in" (resuming from dir), relabels every record,
// writes it to "out" and acknowledges its input once written.
func ackedPipeline(c Config, dir string, bounded bool) *beam.Pipeline {
	p, s := beam.NewPipelineWithRoot()
	msgs := Read(s, ReadConfig{Config: c, Topic: c.Topic("in"), Bounded: bounded, PositionsDir: dir, PollInterval: 50 * time.Millisecond})
	written := WriteAcked(s, WriteConfig{Config: c, Topic: c.Topic("out")}, beam.ParDo(s, relabelWithOrigin, msgs))
	AckOrigins(s, dir, written)
	return p
}

// An unbounded read picks up records produced while the pipeline runs;
// the pipeline is then stopped mid-stream (cancelled, as a crash would),
// more records arrive, and a restarted pipeline resumes from the saved
// positions: every record reaches the output, and no record whose
// position was saved before the stop is written twice.
func TestRestartResumesWithoutLoss(t *testing.T) {
	c := startBroker(t, "in", "out")
	tin, tout := c.Topic("in"), c.Topic("out")
	dir := t.TempDir()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runPipeline(t, ctx, ackedPipeline(c, dir, false)) }()

	// Produce while the pipeline runs, in small batches, and wait until the
	// output is visibly moving before pulling the plug.
	var produced atomic.Int64
	stopProducing := make(chan struct{})
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		for i := 0; ; i += 20 {
			select {
			case <-stopProducing:
				return
			default:
			}
			produce(t, c, tin, i, 20)
			produced.Store(int64(i + 20))
			time.Sleep(20 * time.Millisecond) // paces the producer on purpose: input keeps coming
		}
	}()
	testenv.Eventually(t, 60*time.Second, "200 records out of the unbounded read", func() bool {
		return len(kafkatest.ReadAll(t, c.Brokers[0], tout, 30*time.Second)) >= 200
	})
	close(stopProducing)
	<-prodDone
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "cancel") {
			t.Logf("stopped pipeline: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the pipeline did not stop on cancel")
	}
	time.Sleep(200 * time.Millisecond) // let in-flight bundles of the stopped job die
	saved, err := loadPositions(dir, tin)
	if err != nil || saved == nil {
		t.Fatalf("no positions saved before the stop: %v", err)
	}
	before := len(kafkatest.ReadAll(t, c.Brokers[0], tout, 30*time.Second))
	n := int(produced.Load())
	t.Logf("stopped after %d of %d records written", before, n)

	// More records arrive while nothing runs; the restarted (bounded)
	// pipeline must cover the unacknowledged rest and the new ones.
	produce(t, c, tin, n, 100)
	n += 100
	ctx2, cancel2 := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel2()
	if err := runPipeline(t, ctx2, ackedPipeline(c, dir, true)); err != nil {
		t.Fatal(err)
	}
	out := consumeAll(t, c, tout, n, time.Minute)
	count := map[string]int{}
	for _, m := range out {
		src, _, _ := strings.Cut(string(m.Value), " ")
		count[src]++
	}
	in := consumeAll(t, c, tin, n, time.Minute)
	if len(in) != n {
		t.Fatalf("input topic holds %d records, produced %d", len(in), n)
	}
	dups := 0
	for _, m := range in {
		src := Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset}.Source()
		switch c := count[src]; {
		case c == 0:
			t.Errorf("record %s (key %s) was lost", src, m.Key)
		case c > 1:
			dups++
			pp := saved.partition(m.Partition)
			if pp != nil && (m.Offset < pp.Next || contains(pp.Done, m.Offset)) {
				t.Errorf("record %s was acknowledged before the stop but written %d times", src, c)
			}
		}
	}
	final, _ := LoadPositions(dir, tin)
	for _, m := range in {
		if final[m.Partition] <= m.Offset {
			t.Errorf("after the restart, partition %d's position %d does not cover offset %d", m.Partition, final[m.Partition], m.Offset)
			break
		}
	}
	t.Logf("%d records, %d written again after the restart (in flight at the stop)", n, dups)
}

func contains(xs []int64, x int64) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
