package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"swerl/schemas"
	"swerl/sinks/parquetio"
)

// RawRecord is a Parquet row of a record whose topic holds no swerl
// record type.
type RawRecord struct {
	Topic     string `parquet:"topic"`
	Partition int    `parquet:"partition"`
	Offset    int64  `parquet:"offset"`
	Key       []byte `parquet:"key"`
	Value     []byte `parquet:"value"`
	TimeMS    int64  `parquet:"time_ms"`
}

// Kinds of topic content for Replay.
const (
	KindSamples    = "samples"
	KindInstances  = "instances"
	KindWeights    = "weights"
	KindDeadLetter = "deadletter"
	KindRaw        = "raw"
)

// KindOf guesses what a topic holds from its name: the swerl topic name
// it ends with, else KindRaw.
func KindOf(topic string) string {
	for _, k := range []string{KindSamples, KindInstances, KindWeights, KindDeadLetter} {
		if strings.HasSuffix(topic, k) {
			return k
		}
	}
	return KindRaw
}

// ReplayConfig configures Replay.
type ReplayConfig struct {
	// Read selects the topic and the offset or time range; the read is
	// bounded.
	Read ReadConfig
	// Kind of the topic's values (KindSamples, …); "" guesses from the
	// topic name.
	Kind string
	// Out is the output root: rows go to Out/<kind>/, undecodable records
	// to Out/deadletter/.
	Out string
	// Rescore, when set, takes every sample of a samples topic in place of
	// Replay writing it, and says what to write instead.
	Rescore Rescorer
	// Progress receives a progress line every ProgressEvery (default 2s)
	// and the summary; nil is silent.
	Progress      io.Writer
	ProgressEvery time.Duration
	// RowsPerFile of the Parquet output; default 10000.
	RowsPerFile int
}

// Rescorer stands between a replay's decoded samples and its output
// (ReplayConfig.Rescore). Replay writes the samples and dead letters it
// returns; how it groups and scores them is its own (cmd/swerl's
// assembles GRPO groups with transforms/groups).
type Rescorer interface {
	// Add takes a sample (Source set) and the record it was decoded
	// from.
	Add(ctx context.Context, s schemas.Sample, m Message) ([]schemas.Sample, []schemas.DeadLetter, error)
	// End is called once the read is done, for what Add held back.
	End(ctx context.Context) ([]schemas.Sample, []schemas.DeadLetter, error)
}

// ReplayStats summarises a replay.
type ReplayStats struct {
	Records    int64 // read from the topic
	Rows       int64 // written to Out/<kind>/
	DeadLetter int64 // written to Out/deadletter/
	Files      []string
}

// Replay re-reads a topic into Parquet files: samples, instances, weight
// versions and dead letters decode to their schemas rows (Sample.Source set
// to "topic@partition:offset"); other topics are written as RawRecord
// rows. A value that does not decode is written to Out/deadletter/ with the
// reason, and the replay goes on.
func Replay(ctx context.Context, cfg ReplayConfig) (ReplayStats, error) {
	var st ReplayStats
	kind := cfg.Kind
	if kind == "" {
		kind = KindOf(cfg.Read.Topic)
	}
	if cfg.Out == "" {
		return st, errors.New("kafkaio: replay: no output directory")
	}
	if cfg.Rescore != nil && kind != KindSamples {
		return st, fmt.Errorf("kafkaio: replay: rescoring needs a samples topic, %s holds %s", cfg.Read.Topic, kind)
	}
	every := cfg.ProgressEvery
	if every <= 0 {
		every = 2 * time.Second
	}
	dir := func(k string) string { return filepath.Join(cfg.Out, k) }
	samples := parquetio.NewDirWriter[schemas.Sample](dir(KindSamples), "replay", cfg.RowsPerFile)
	instances := parquetio.NewDirWriter[schemas.Instance](dir(KindInstances), "replay", cfg.RowsPerFile)
	weights := parquetio.NewDirWriter[schemas.WeightVersion](dir(KindWeights), "replay", cfg.RowsPerFile)
	dead := parquetio.NewDirWriter[schemas.DeadLetter](dir(KindDeadLetter), "replay", cfg.RowsPerFile)
	raw := parquetio.NewDirWriter[RawRecord](dir(KindRaw), "replay", cfg.RowsPerFile)

	deadLetter := func(m Message, stage string, err error) error {
		st.DeadLetter++
		return dead.Write(DeadLetterFor(m, stage, err))
	}
	// rescored writes what the Rescorer returned.
	rescored := func(out []schemas.Sample, ds []schemas.DeadLetter, err error) error {
		if err != nil {
			return err
		}
		for _, d := range ds {
			st.DeadLetter++
			if err := dead.Write(d); err != nil {
				return err
			}
		}
		st.Rows += int64(len(out))
		return samples.Write(out...)
	}

	start := time.Now()
	last := start
	progress := func(final bool) {
		if cfg.Progress == nil {
			return
		}
		el := time.Since(start).Seconds()
		word := "replay:"
		if final {
			word = "replay done:"
		}
		fmt.Fprintf(cfg.Progress, "%s %s: %d records, %d %s rows, %d dead-letter, %.0f records/s, %.1fs\n",
			word, cfg.Read.Topic, st.Records, st.Rows, kind, st.DeadLetter, float64(st.Records)/max(el, 1e-9), el)
	}
	err := Scan(ctx, cfg.Read, func(m Message) error {
		st.Records++
		if time.Since(last) >= every {
			last = time.Now()
			progress(false)
		}
		src := m.Source()
		switch kind {
		case KindSamples:
			s, err := Decode[schemas.Sample](m.Value, src)
			if err != nil {
				return deadLetter(m, "decode", err)
			}
			s.Source = src
			if cfg.Rescore == nil {
				st.Rows++
				return samples.Write(s)
			}
			return rescored(cfg.Rescore.Add(ctx, s, m))
		case KindInstances:
			in, err := Decode[schemas.Instance](m.Value, src)
			if err != nil {
				return deadLetter(m, "decode", err)
			}
			st.Rows++
			return instances.Write(in)
		case KindWeights:
			w, err := Decode[schemas.WeightVersion](m.Value, src)
			if err != nil {
				return deadLetter(m, "decode", err)
			}
			st.Rows++
			return weights.Write(w)
		case KindDeadLetter:
			d, err := Decode[schemas.DeadLetter](m.Value, src)
			if err != nil {
				return deadLetter(m, "decode", err)
			}
			st.Rows++
			return dead.Write(d)
		default:
			st.Rows++
			return raw.Write(RawRecord{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, TimeMS: m.TimeMS})
		}
	})
	if err != nil {
		return st, err
	}
	if cfg.Rescore != nil {
		if err := rescored(cfg.Rescore.End(ctx)); err != nil {
			return st, err
		}
	}
	for _, c := range []interface {
		Close() error
		Files() []string
	}{samples, instances, weights, dead, raw} {
		if err := c.Close(); err != nil {
			return st, err
		}
		st.Files = append(st.Files, c.Files()...)
	}
	progress(true)
	return st, nil
}
