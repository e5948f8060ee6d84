package train

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"swerl/internal/engineapi"
	"swerl/schemas"
	"swerl/sinks/kafkaio"
	"swerl/sinks/weightsync"
)

// FollowWeights reads the weights topic of c from its start until ctx
// ends, and records in a, for every engine an announcement names, the
// adapter that engine holds: the learner announces each version when it
// publishes it (no engines) and again once its push completed on some
// engines (swerl learn --engine). Full-weight versions (no adapter) are
// skipped: a request cannot name them. A topic that does not exist yet
// is waited for; a record that does not decode is logged and skipped. It
// returns ctx's error.
func FollowWeights(ctx context.Context, c kafkaio.Config, a *weightsync.Table, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	topic := c.Topic(kafkaio.Weights)
	dialer, err := c.Dialer()
	if err != nil {
		return err
	}
	var parts []int
	for {
		if parts, err = kafkaio.Partitions(ctx, c, topic); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	var wg sync.WaitGroup
	for _, p := range parts {
		wg.Go(func() {
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: c.Brokers, Topic: topic, Partition: p, Dialer: dialer,
				StartOffset: kafka.FirstOffset, MaxWait: 250 * time.Millisecond})
			defer r.Close()
			for {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
						log.Warn("train: reading the weights topic failed; adapters announced from now on are missed", "topic", topic, "partition", p, "err", err.Error())
					}
					return
				}
				var v schemas.WeightVersion
				if err := schemas.Decode(m.Value, &v); err != nil {
					log.Warn("train: a weights announcement does not decode; skipped", "topic", topic, "partition", p, "offset", m.Offset, "err", err.Error())
					continue
				}
				if v.Adapter == "" {
					continue
				}
				for _, e := range v.Engines {
					a.Announce(e, engineapi.ServedVersion{Version: v.Version, Adapter: v.Adapter})
				}
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}

// followAnnouncements runs FollowWeights in the background until ctx ends
// or the returned stop is called; stop waits for it to return.
func followAnnouncements(ctx context.Context, c kafkaio.Config, a *weightsync.Table, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		FollowWeights(ctx, c, a, log)
	}()
	return func() { cancel(); <-done }
}
