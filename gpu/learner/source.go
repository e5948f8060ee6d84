package learner

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"swerl/schemas"
	"swerl/sinks/parquetio"
)

// Source yields samples one at a time. Next returns io.EOF at the end of
// an offline source; a streaming source blocks until a sample arrives or
// ctx ends.
type Source interface {
	Next(ctx context.Context) (schemas.Sample, error)
}

// Committer is implemented by sources whose read positions can be
// committed (a Kafka consumer group). The learner calls Commit with the
// positions consumed up to a version only after that version is
// published.
type Committer interface {
	Commit(ctx context.Context, offsets []schemas.TopicOffset) error
}

// SliceSource yields the samples of a slice, then io.EOF.
type SliceSource struct {
	Samples []schemas.Sample
	i       int
}

// Next implements Source.
func (s *SliceSource) Next(ctx context.Context) (schemas.Sample, error) {
	if err := ctx.Err(); err != nil {
		return schemas.Sample{}, err
	}
	if s.i >= len(s.Samples) {
		return schemas.Sample{}, io.EOF
	}
	s.i++
	return s.Samples[s.i-1], nil
}

// ParquetSource reads samples from a Parquet file or from every complete
// *.parquet file of a directory, in name order. Each sample without a
// Source gets "FILE:ROW" (row counted from 1).
func ParquetSource(path string) (Source, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("learner: samples: %w", err)
	}
	files := []string{path}
	if st.IsDir() {
		if files, err = parquetio.Files(path); err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("learner: samples: no *.parquet files in %s", path)
		}
	}
	var all []schemas.Sample
	for _, f := range files {
		row := 0
		if err := parquetio.Scan(f, func(rows []schemas.Sample) error {
			for _, r := range rows {
				row++
				if r.Source == "" {
					r.Source = f + ":" + strconv.Itoa(row)
				}
				all = append(all, r)
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("learner: samples: %w", err)
		}
	}
	return &SliceSource{Samples: all}, nil
}

// offsetOf parses a Kafka position "topic@partition:offset" from a
// sample's Source; ok is false for other sources (files).
func offsetOf(source string) (schemas.TopicOffset, bool) {
	at := strings.LastIndex(source, "@")
	if at <= 0 {
		return schemas.TopicOffset{}, false
	}
	ps, os, ok := strings.Cut(source[at+1:], ":")
	if !ok {
		return schemas.TopicOffset{}, false
	}
	p, err1 := strconv.Atoi(ps)
	o, err2 := strconv.ParseInt(os, 10, 64)
	if err1 != nil || err2 != nil || p < 0 || o < 0 {
		return schemas.TopicOffset{}, false
	}
	return schemas.TopicOffset{Topic: source[:at], Partition: p, Offset: o}, true
}
