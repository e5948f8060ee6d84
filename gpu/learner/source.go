package learner

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

// seeker is a source that can be moved to the commit points of the
// version training continues from (its own entry among them).
type seeker interface {
	seek(commit []schemas.TopicOffset) error
}

// positioner is a source that says where the sample Next returned last was
// read; ok is false when it keeps no positions.
type positioner interface {
	position() (schemas.TopicOffset, bool)
}

// position is where sample s, just returned by src, was read: the source's
// own position, else the Kafka position in s.Source.
func position(src Source, s *schemas.Sample) (schemas.TopicOffset, bool) {
	if p, ok := src.(positioner); ok {
		if o, ok := p.position(); ok {
			return o, true
		}
	}
	return offsetOf(s.Source)
}

// SliceSource yields the samples of a slice, then io.EOF. With a Name it
// keeps positions: sample i is at offset i of partition 0 of the "topic"
// Name, the learner records how far it trained in every index row
// (Learner.Offsets), and a resumed learner's Run starts the source there.
type SliceSource struct {
	Samples []schemas.Sample
	Name    string
	i       int
}

func (s *SliceSource) position() (schemas.TopicOffset, bool) {
	if s.Name == "" || s.i == 0 {
		return schemas.TopicOffset{}, false
	}
	return schemas.TopicOffset{Topic: s.Name, Offset: int64(s.i - 1)}, true
}

func (s *SliceSource) seek(commit []schemas.TopicOffset) error {
	if s.Name == "" {
		return nil
	}
	for _, o := range commit {
		if o.Topic != s.Name || o.Partition != 0 {
			continue
		}
		if o.Offset > int64(len(s.Samples)) {
			return fmt.Errorf("learner: %s holds %d samples, but the checkpoint trained up to sample %d of it (were files removed?)", s.Name, len(s.Samples), o.Offset)
		}
		s.i = int(o.Offset)
	}
	return nil
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

// ParquetSource reads samples from a Parquet file, from every complete
// *.parquet file of a directory, in name order, or from a JSONL file
// (name ending in .jsonl: one sample a line in the schema's JSON form, as
// swerl cat prints it, so another tool can make or edit a sample set; a
// line that does not decode is an error naming the file and the line). Each sample without a
// Source gets "FILE:ROW" (row counted from 1). The source keeps positions
// (SliceSource.Name "file:" and the absolute path): a resumed learner goes
// on after the samples it trained on. Files added to a directory later
// must sort after the ones read before (the train pipeline's part names
// are ordered by time).
func ParquetSource(path string) (Source, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("learner: samples: %w", err)
	}
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
	if !st.IsDir() && strings.HasSuffix(path, ".jsonl") {
		if all, err = readJSONL(path); err != nil {
			return nil, err
		}
		files = nil
	}
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
	return &SliceSource{Samples: all, Name: "file:" + abs}, nil
}

// readJSONL reads the samples of a JSONL file; blank lines are skipped
// and each sample without a Source gets "FILE:LINE".
func readJSONL(path string) ([]schemas.Sample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("learner: samples: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<30)
	var out []schemas.Sample
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var s schemas.Sample
		if err := schemas.Decode(b, &s); err != nil {
			return nil, fmt.Errorf("learner: samples: %s:%d: %w", path, line, err)
		}
		if s.Source == "" {
			s.Source = path + ":" + strconv.Itoa(line)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("learner: samples: %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("learner: samples: %s holds no samples", path)
	}
	return out, nil
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
