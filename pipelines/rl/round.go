package rl

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/segmentio/kafka-go"

	"swerl/pipelines/train"
	"swerl/schemas"
	"swerl/sinks/kafkaio"
	"swerl/sinks/parquetio"
)

// BeamRollouts returns the RolloutFunc of swerl run that goes through the
// real dataflow: the round's instances are produced to the instances topic,
// the Beam train pipeline (prompt → rollout → reward → group → advantage)
// reads them back on Prism, samples the newest published version through
// the in-process model policy (or a server), and writes the samples to the
// samples topic and to Parquet in the round's staging folder
// (StagedSamples), from which they are read back; Run moves them into
// out/samples once the round's step is published.
func BeamRollouts(kc kafkaio.Config, out string, tc train.Config) RolloutFunc {
	return func(ctx context.Context, round int, ins []schemas.Instance) ([]schemas.Sample, error) {
		path := filepath.Join(out, "rounds", fmt.Sprintf("round-%06d.jsonl", round))
		if err := WriteInstances(path, ins); err != nil {
			return nil, err
		}
		if _, err := train.Feed(ctx, kc, path, filepath.Join(out, "deadletter")); err != nil {
			return nil, err
		}
		staged := StagedSamples(out, round)
		cfg := tc
		cfg.Kafka, cfg.Out, cfg.SamplesDir, cfg.Bounded = kc, out, staged, true
		cfg.GroupPrefix = RoundPrefix(round)
		cfg.Seed = tc.Seed + int64(round)
		if _, err := train.Run(ctx, cfg); err != nil {
			return nil, err
		}
		samples, err := parquetio.ReadDir[schemas.Sample](staged)
		if err != nil {
			return nil, err
		}
		sort.Slice(samples, func(i, j int) bool { return samples[i].ID < samples[j].ID })
		return samples, nil
	}
}

// Publisher writes a run's samples to the samples topic, keyed by
// group id, so any Kafka tool (or swerl replay) sees the run's data.
type Publisher struct {
	w *kafkaio.Writer
}

func NewPublisher(kc kafkaio.Config) (*Publisher, error) {
	w, err := kafkaio.NewWriter(kafkaio.WriteConfig{Config: kc, Topic: kc.Topic(kafkaio.Samples), BatchTimeout: 10 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	return &Publisher{w: w}, nil
}

func (p *Publisher) Publish(ctx context.Context, samples []schemas.Sample) error {
	msgs := make([]kafka.Message, 0, len(samples))
	for i := range samples {
		v, err := kafkaio.Encode(&samples[i])
		if err != nil {
			return err
		}
		msgs = append(msgs, kafka.Message{Key: []byte(samples[i].GroupID), Value: v})
	}
	if len(msgs) == 0 {
		return nil
	}
	return p.w.WriteMessages(ctx, msgs...)
}

func (p *Publisher) Close() error { return p.w.Close() }
