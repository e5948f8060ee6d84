package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/segmentio/kafka-go"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*Message)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*partitionSpec)(nil)).Elem())
	register.DoFn3x1[context.Context, []byte, func(partitionSpec), error](&partitionsFn{})
	register.Emitter1[partitionSpec]()
	register.DoFn4x1[context.Context, *sdf.LockRTracker, partitionSpec, func(beam.EventTime, Message), error](&boundedReadFn{})
	register.DoFn5x2[context.Context, *watermarkEstimator, *sdf.LockRTracker, partitionSpec, func(beam.EventTime, Message), sdf.ProcessContinuation, error](&unboundedReadFn{})
	register.DoFn5x2[context.Context, *watermarkEstimator, *sdf.LockRTracker, []byte, func(beam.EventTime, Message), sdf.ProcessContinuation, error](&groupReadFn{})
	register.Emitter2[beam.EventTime, Message]()
}

// ReadConfig configures Read.
type ReadConfig struct {
	Config Config
	// Topic is the full topic name, e.g. Config.Topic(Instances).
	Topic string
	// Partitions to read; nil reads all.
	Partitions []int
	// Bounded reads every partition up to the end offset it has when the
	// read starts (or ToOffset/ToTime), then finishes. Unbounded reads
	// poll for new records forever.
	Bounded bool
	// FromOffset is the first offset read in every partition (0: the first
	// retained record); offsets below the first retained are clamped up.
	FromOffset int64
	// FromTime, when set, starts every partition at its first record with
	// a timestamp at or after it (overrides FromOffset).
	FromTime time.Time
	// FromLatest starts at the end of every partition: only records
	// produced after the read starts (overrides FromOffset and FromTime).
	FromLatest bool
	// ToOffset, when > 0, is the exclusive end offset of every partition
	// (implies Bounded).
	ToOffset int64
	// ToTime, when set, ends every partition before its first record with
	// a timestamp at or after it (implies Bounded).
	ToTime time.Time
	// PositionsDir, when set, holds the positions file of this topic
	// (see Ack): partitions resume from the first unacknowledged offset,
	// overriding the From fields, and offsets acknowledged out of order
	// are skipped.
	PositionsDir string
	// PollInterval is how long an unbounded read waits before polling an
	// idle partition again; default 200ms.
	PollInterval time.Duration
	// MaxWait bounds one fetch from the broker; default 250ms.
	MaxWait time.Duration
	// GroupMember, when set, is the Handle of a GroupMember of this
	// process: the read is unbounded and emits the records of the
	// partitions the consumer group assigns that member, from the group's
	// committed offsets, following rebalances; Topic, Partitions, the
	// From and To fields and PositionsDir are not used. Acknowledge with
	// AckGroup or AckOriginsGroup.
	GroupMember string
}

func (rc ReadConfig) bounded() bool { return rc.Bounded || rc.ToOffset > 0 || !rc.ToTime.IsZero() }

// Read reads rc.Topic as a PCollection of Message, each with the record
// timestamp as its event time. See ReadConfig for bounded and unbounded
// reads.
func Read(s beam.Scope, rc ReadConfig) beam.PCollection {
	s = s.Scope("kafkaio.Read")
	imp := beam.Impulse(s)
	if rc.GroupMember != "" {
		return beam.ParDo(s, &groupReadFn{RC: rc}, imp)
	}
	parts := beam.ParDo(s, &partitionsFn{RC: rc}, imp)
	if rc.bounded() {
		return beam.ParDo(s, &boundedReadFn{readFn{RC: rc}}, parts)
	}
	return beam.ParDo(s, &unboundedReadFn{readFn{RC: rc}}, parts)
}

// partitionSpec is one partition to read: [Start, End) with End
// math.MaxInt64 for an unbounded read; Skip are offsets acknowledged out
// of order, not emitted again.
type partitionSpec struct {
	Topic      string
	Partition  int
	Start, End int64
	Skip       []int64
}

// partitionsFn lists the partitions of the topic and resolves their start
// and end offsets when the pipeline starts.
type partitionsFn struct {
	RC ReadConfig
}

func (fn *partitionsFn) ProcessElement(ctx context.Context, _ []byte, emit func(partitionSpec)) error {
	specs, err := resolve(ctx, fn.RC)
	if err != nil {
		return err
	}
	for _, s := range specs {
		emit(s)
	}
	return nil
}

// resolve turns a ReadConfig into partition specs (and records the start
// of every partition in the positions file, so that Ack can advance it).
func resolve(ctx context.Context, rc ReadConfig) ([]partitionSpec, error) {
	c := rc.Config
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if rc.Topic == "" {
		return nil, errors.New("kafkaio: read: no topic")
	}
	var specs []partitionSpec
	err := c.Retry.Do(ctx, "start reading "+rc.Topic, func() (err error) {
		specs, err = resolveOnce(ctx, rc)
		return err
	})
	return specs, err
}

// resolveOnce is one try of resolve.
func resolveOnce(ctx context.Context, rc ReadConfig) ([]partitionSpec, error) {
	c := rc.Config
	parts := rc.Partitions
	if parts == nil {
		var err error
		// A missing topic is an error, not created here: the subcommands
		// create swerl's topics (EnsureTopics) with the configured
		// partitions before they read.
		if parts, err = Partitions(ctx, c, rc.Topic); err != nil {
			return nil, err
		}
	}
	var pos *positionsFile
	var cluster string
	reset := false
	if rc.PositionsDir != "" {
		var err error
		if pos, err = loadPositions(rc.PositionsDir, rc.Topic); err != nil {
			return nil, err
		}
		if cluster, err = ClusterID(ctx, c); err != nil {
			return nil, err
		}
		if pos != nil && pos.ClusterID != "" && cluster != "" && pos.ClusterID != cluster {
			// The offsets were saved against another cluster (an earlier
			// embedded broker, or another cluster entirely): they say
			// nothing about this one. Start over rather than skip.
			log.Warnf(ctx, "kafkaio: %s: positions in %s are for cluster %s, not %s; reading from the configured start",
				rc.Topic, rc.PositionsDir, pos.ClusterID, cluster)
			pos, reset = nil, true
		}
	}
	d, err := c.Dialer()
	if err != nil {
		return nil, err
	}
	var specs []partitionSpec
	base, force := map[int]int64{}, map[int]int64{}
	for _, p := range parts {
		conn, err := d.DialLeader(ctx, "tcp", c.Brokers[0], rc.Topic, p)
		if err != nil {
			return nil, fmt.Errorf("kafkaio: %s partition %d: %w", rc.Topic, p, err)
		}
		spec, stale, err := resolvePartition(conn, rc, p, pos)
		conn.Close()
		if err != nil {
			return nil, fmt.Errorf("kafkaio: %s partition %d: %w", rc.Topic, p, err)
		}
		switch {
		case stale:
			log.Warnf(ctx, "kafkaio: %s partition %d: the saved position is past the end of the partition (topic recreated?); reading from offset %d",
				rc.Topic, p, spec.Start)
			force[p] = spec.Start
		case pos.partition(p) == nil:
			base[p] = spec.Start
		}
		specs = append(specs, spec)
	}
	if rc.PositionsDir != "" {
		if err := updatePositions(rc.PositionsDir, rc.Topic, posUpdate{Cluster: cluster, Reset: reset, Base: base, Force: force}); err != nil {
			return nil, err
		}
	}
	return specs, nil
}

// resolvePartition computes the range to read of partition p. stale
// reports a saved position past the end of the partition (ignored).
func resolvePartition(conn *kafka.Conn, rc ReadConfig, p int, pos *positionsFile) (s partitionSpec, stale bool, err error) {
	first, last, err := conn.ReadOffsets()
	if err != nil {
		return s, false, err
	}
	s = partitionSpec{Topic: rc.Topic, Partition: p, Start: rc.FromOffset, End: math.MaxInt64}
	switch {
	case rc.FromLatest:
		s.Start = last
	case !rc.FromTime.IsZero():
		if s.Start, err = offsetForTime(conn, rc.FromTime, last); err != nil {
			return s, false, err
		}
	}
	if pp := pos.partition(p); pp != nil {
		if pp.Next > last {
			stale = true
		} else {
			s.Start = pp.Next
			s.Skip = pp.doneFrom(pp.Next)
		}
	}
	s.Start = max(s.Start, first)
	if rc.bounded() {
		s.End = last
		if rc.ToOffset > 0 {
			s.End = min(s.End, rc.ToOffset)
		}
		if !rc.ToTime.IsZero() {
			e, err := offsetForTime(conn, rc.ToTime, last)
			if err != nil {
				return s, false, err
			}
			s.End = min(s.End, e)
		}
		s.End = max(s.End, s.Start)
	}
	return s, stale, nil
}

// offsetForTime is the offset of the partition's first record with a
// timestamp at or after t, or end when no record is that late: Kafka's
// ListOffsets answers that case with offset -1, which as a start would
// mean the first record and as an end nothing at all.
func offsetForTime(conn *kafka.Conn, t time.Time, end int64) (int64, error) {
	o, err := conn.ReadOffset(t)
	if err != nil {
		return 0, fmt.Errorf("offset for time %s: %w", t.Format(time.RFC3339), err)
	}
	if o < 0 {
		return end, nil
	}
	return o, nil
}

// readFn is the part shared by the bounded and unbounded splittable read.
type readFn struct {
	RC ReadConfig

	mu    sync.Mutex
	conns map[string]*kafka.Conn
}

func (fn *readFn) CreateInitialRestriction(s partitionSpec) offsetrange.Restriction {
	return offsetrange.Restriction{Start: s.Start, End: s.End}
}

func (fn *readFn) SplitRestriction(_ partitionSpec, r offsetrange.Restriction) []offsetrange.Restriction {
	return []offsetrange.Restriction{r}
}

func (fn *readFn) RestrictionSize(_ partitionSpec, r offsetrange.Restriction) float64 {
	if r.End == math.MaxInt64 {
		return 1 // unknown, growing
	}
	return r.Size()
}

func (fn *readFn) CreateTracker(r offsetrange.Restriction) *sdf.LockRTracker {
	return sdf.NewLockRTracker(offsetrange.NewTracker(r))
}

// CreateTracker for an unbounded read: a partition is one sequence, read
// by one ProcessElement at a time, so the runner may only checkpoint it
// (split at the current position), never cut its endless range in two.
func (fn *unboundedReadFn) CreateTracker(r offsetrange.Restriction) *sdf.LockRTracker {
	return sdf.NewLockRTracker(&checkpointTracker{offsetrange.NewTracker(r)})
}

// checkpointTracker is an offset-range tracker that accepts only splits
// at fraction 0 (self-checkpoints and runner checkpoints). A fractional
// split of [next, MaxInt64) would start a residual near offset 2^62.
type checkpointTracker struct{ *offsetrange.Tracker }

// TrySplit implements sdf.RTracker.
func (t *checkpointTracker) TrySplit(fraction float64) (primary, residual any, err error) {
	if fraction > 0 {
		return t.GetRestriction(), nil, nil
	}
	return t.Tracker.TrySplit(0)
}

// IsBounded implements sdf.BoundableRTracker.
func (t *checkpointTracker) IsBounded() bool {
	return t.GetRestriction().(offsetrange.Restriction).End != math.MaxInt64
}

// TruncateRestriction drops what is left of an unbounded read when the
// pipeline drains.
func (fn *unboundedReadFn) TruncateRestriction(rt *sdf.LockRTracker, _ partitionSpec) offsetrange.Restriction {
	start := rt.GetRestriction().(offsetrange.Restriction).Start
	return offsetrange.Restriction{Start: start, End: start}
}

func (fn *readFn) Teardown() {
	fn.mu.Lock()
	defer fn.mu.Unlock()
	for k, c := range fn.conns {
		c.Close()
		delete(fn.conns, k)
	}
}

func (fn *readFn) conn(ctx context.Context, s partitionSpec) (*kafka.Conn, error) {
	k := source(s.Topic, s.Partition, 0)
	fn.mu.Lock()
	c := fn.conns[k]
	fn.mu.Unlock()
	if c != nil {
		return c, nil
	}
	d, err := fn.RC.Config.Dialer()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for _, b := range fn.RC.Config.Brokers {
		c, lastErr = d.DialLeader(ctx, "tcp", b, s.Topic, s.Partition)
		if lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		return nil, fmt.Errorf("kafkaio: %s partition %d: %w", s.Topic, s.Partition, lastErr)
	}
	fn.mu.Lock()
	if fn.conns == nil {
		fn.conns = map[string]*kafka.Conn{}
	}
	fn.conns[k] = c
	fn.mu.Unlock()
	return c, nil
}

func (fn *readFn) drop(s partitionSpec) {
	k := source(s.Topic, s.Partition, 0)
	fn.mu.Lock()
	if c := fn.conns[k]; c != nil {
		c.Close()
		delete(fn.conns, k)
	}
	fn.mu.Unlock()
}

// fetch reads one batch from offset next on. It returns the messages at or
// after next and the partition's high watermark.
func (fn *readFn) fetch(ctx context.Context, s partitionSpec, next int64) ([]kafka.Message, int64, error) {
	var msgs []kafka.Message
	var hw int64
	err := fn.RC.Config.Retry.Do(ctx, "fetch "+source(s.Topic, s.Partition, next), func() error {
		msgs = msgs[:0]
		c, err := fn.conn(ctx, s)
		if err != nil {
			return err
		}
		maxWait := fn.RC.MaxWait
		if maxWait <= 0 {
			maxWait = 250 * time.Millisecond
		}
		if _, err := c.Seek(next, kafka.SeekAbsolute|kafka.SeekDontCheck); err != nil {
			fn.drop(s)
			return err
		}
		c.SetReadDeadline(time.Now().Add(maxWait + 10*time.Second))
		b := c.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: 16 << 20, MaxWait: maxWait})
		for {
			m, err := b.ReadMessage()
			if err != nil {
				break
			}
			if m.Offset >= next {
				msgs = append(msgs, m)
			}
		}
		hw = b.HighWaterMark()
		if err := b.Close(); err != nil {
			var ke kafka.Error
			if errors.As(err, &ke) && ke == kafka.RequestTimedOut {
				return nil
			}
			fn.drop(s)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("kafkaio: fetch %s: %w", source(s.Topic, s.Partition, next), err)
	}
	return msgs, hw, nil
}

// step reads one fetch's worth of the restriction from offset next on
// and emits it. It returns the next offset to read, how many records it
// claimed (emitted or skipped), the partition's high watermark, and done when the tracker
// refuses further claims (the restriction is finished or was split).
func (fn *readFn) step(ctx context.Context, rt *sdf.LockRTracker, s partitionSpec, skip map[int64]bool, next int64, emit func(beam.EventTime, Message)) (newNext int64, n int, hw int64, done bool, err error) {
	msgs, hw, err := fn.fetch(ctx, s, next)
	if err != nil {
		return next, 0, 0, false, err
	}
	for _, m := range msgs {
		if !rt.TryClaim(m.Offset) {
			return next, n, hw, true, rt.GetError()
		}
		next = m.Offset + 1
		n++
		if skip[m.Offset] {
			continue
		}
		emit(beam.EventTime(m.Time.UnixMilli()), Message{
			Topic: m.Topic, Partition: m.Partition, Offset: m.Offset,
			Key: m.Key, Value: m.Value, TimeMS: m.Time.UnixMilli(),
		})
	}
	return next, n, hw, false, nil
}

func skipSet(s partitionSpec) map[int64]bool {
	skip := make(map[int64]bool, len(s.Skip))
	for _, o := range s.Skip {
		skip[o] = true
	}
	return skip
}

// boundedReadFn reads offset ranges to their end.
type boundedReadFn struct{ readFn }

func (fn *boundedReadFn) ProcessElement(ctx context.Context, rt *sdf.LockRTracker, s partitionSpec, emit func(beam.EventTime, Message)) error {
	skip := skipSet(s)
	next := rt.GetRestriction().(offsetrange.Restriction).Start
	for {
		end := rt.GetRestriction().(offsetrange.Restriction).End
		if next >= end {
			rt.TryClaim(end) // marks the restriction done
			return nil
		}
		var n int
		var hw int64
		var done bool
		var err error
		next, n, hw, done, err = fn.step(ctx, rt, s, skip, next, emit)
		if err != nil || done {
			return err
		}
		if n == 0 && next < end && hw >= end {
			// The broker has nothing more below the end: the rest of the
			// range is a gap (control records or compacted offsets).
			rt.TryClaim(end)
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// unboundedReadFn polls partitions forever, checkpointing itself so the
// runner can commit bundles, and advances the watermark when idle.
type unboundedReadFn struct{ readFn }

func (fn *unboundedReadFn) InitialWatermarkEstimatorState(et beam.EventTime, _ offsetrange.Restriction, _ partitionSpec) int64 {
	return int64(et)
}

func (fn *unboundedReadFn) CreateWatermarkEstimator(ms int64) *watermarkEstimator {
	return &watermarkEstimator{state: ms}
}

func (fn *unboundedReadFn) WatermarkEstimatorState(we *watermarkEstimator) int64 {
	return we.state
}

// maxSlice bounds one ProcessElement call of an unbounded read: after it,
// the read checkpoints so downstream stages see its output.
const maxSlice = 500 * time.Millisecond

func (fn *unboundedReadFn) ProcessElement(ctx context.Context, we *watermarkEstimator, rt *sdf.LockRTracker, s partitionSpec, emit func(beam.EventTime, Message)) (sdf.ProcessContinuation, error) {
	poll := fn.RC.PollInterval
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	start := time.Now()
	skip := skipSet(s)
	next := rt.GetRestriction().(offsetrange.Restriction).Start
	for {
		var n int
		var done bool
		var err error
		next, n, _, done, err = fn.step(ctx, rt, s, skip, next, func(et beam.EventTime, m Message) {
			we.ObserveTimestamp(et.ToTime())
			emit(et, m)
		})
		if err != nil {
			log.Warnf(ctx, "kafkaio: %v (will retry)", err)
			return sdf.ResumeProcessingIn(poll), nil
		}
		if done {
			return sdf.StopProcessing(), nil
		}
		if n == 0 {
			// Caught up: everything before now (less a small allowance for
			// clock skew between producers) has been read.
			we.ObserveTimestamp(time.Now().Add(-time.Second))
			return sdf.ResumeProcessingIn(poll), nil
		}
		if time.Since(start) > maxSlice {
			return sdf.ResumeProcessingIn(0), nil
		}
	}
}

// watermarkEstimator holds the greatest timestamp observed (milliseconds).
type watermarkEstimator struct{ state int64 }

// CurrentWatermark implements sdf.WatermarkEstimator.
func (e *watermarkEstimator) CurrentWatermark() time.Time { return time.UnixMilli(e.state) }

// ObserveTimestamp implements sdf.TimestampObservingEstimator; the
// watermark never moves back.
func (e *watermarkEstimator) ObserveTimestamp(t time.Time) {
	if ms := t.UnixMilli(); ms > e.state {
		e.state = ms
	}
}
