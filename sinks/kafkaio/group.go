package kafkaio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/segmentio/kafka-go"

	"swerl/pipelines/beamrun"
)

// GroupConfig configures a member of a Kafka consumer group that reads one
// topic (JoinGroup).
type GroupConfig struct {
	Config Config
	// Topic is the full topic name, e.g. Config.Topic(Instances).
	Topic string
	// Group is the consumer group id; every process that joins it with the
	// same Topic shares the topic's partitions.
	Group string
	// SessionTimeout is how long the coordinator waits for a heartbeat
	// before it gives a silent member's partitions to the others (a
	// SIGKILLed worker's). Default 10s; brokers refuse less than their
	// group.min.session.timeout.ms (6s by default, the embedded one too).
	SessionTimeout time.Duration
	// HeartbeatInterval: default a tenth of SessionTimeout, which is also
	// how soon a member learns of a rebalance.
	HeartbeatInterval time.Duration
	// RebalanceTimeout is how long the coordinator waits for every member
	// to join again in a rebalance. Default SessionTimeout.
	RebalanceTimeout time.Duration
	// DrainTimeout bounds how long a member that is losing its partitions
	// waits for the records it handed out to be acknowledged (and
	// commits them) before it lets the group move on; what is still in
	// flight then is read again by the partition's next owner. Default
	// half of RebalanceTimeout; it must be below SessionTimeout and
	// RebalanceTimeout.
	DrainTimeout time.Duration
	// MaxInFlight bounds the records handed out and not yet acknowledged
	// (default 256): the most a member has to drain when it loses its
	// partitions, and the most read twice when it dies.
	MaxInFlight int
	// MaxBuffered bounds the records fetched ahead per partition (default
	// 512).
	MaxBuffered int
	// PollInterval is how long an idle partition waits before it is
	// fetched again; default 200ms. MaxWait bounds one fetch; default 250ms.
	PollInterval, MaxWait time.Duration
	// Logf receives one line per generation (its partitions) and per
	// problem; default the Beam log.
	Logf func(format string, args ...any)
}

func (gc GroupConfig) withDefaults() GroupConfig {
	if gc.SessionTimeout <= 0 {
		gc.SessionTimeout = 10 * time.Second
	}
	if gc.HeartbeatInterval <= 0 {
		gc.HeartbeatInterval = max(gc.SessionTimeout/10, 100*time.Millisecond)
	}
	if gc.RebalanceTimeout <= 0 {
		gc.RebalanceTimeout = gc.SessionTimeout
	}
	if gc.DrainTimeout <= 0 {
		gc.DrainTimeout = gc.RebalanceTimeout / 2
	}
	if gc.MaxInFlight <= 0 {
		gc.MaxInFlight = 256
	}
	if gc.MaxBuffered <= 0 {
		gc.MaxBuffered = 512
	}
	if gc.PollInterval <= 0 {
		gc.PollInterval = 200 * time.Millisecond
	}
	if gc.MaxWait <= 0 {
		gc.MaxWait = 250 * time.Millisecond
	}
	if gc.Logf == nil {
		gc.Logf = func(format string, args ...any) { log.Infof(context.Background(), format, args...) }
	}
	return gc
}

// GroupMember is this process's member of a consumer group on one topic.
// It holds the partitions the group assigns it, fetches their records
// ahead, hands them out to a Read (ReadConfig.GroupMember), and commits a
// partition's offset to the group only up to the first record handed out
// and not yet acknowledged (AckGroup): a commit never passes a record
// whose output is not durable, and never moves back within an
// assignment.
//
// In a rebalance (a member joins or leaves, or dies and its session
// expires) every member loses its partitions (kafka-go's eager protocol).
// A member stops handing out records of them at once, waits up to
// DrainTimeout for the records in flight to be acknowledged, commits, and
// only then joins again, so the next owner of a partition starts where
// the last one's output ends. Records still in flight after DrainTimeout,
// and those of a member that died, are read again by the next owner:
// at-least-once, and downstream de-duplicates (the train pipeline's ids
// do not depend on who reads a record).
//
// The member lives in this process and is found by its Handle: the Read
// and the acknowledgements must run in the process that joined (Prism's
// loopback workers do; a remote runner's workers do not).
type GroupMember struct {
	gc      GroupConfig
	handle  string
	cg      *kafka.ConsumerGroup
	rf      *readFn // fetches and its connections, one a partition
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{} // closed when run returns
	wake    chan struct{} // an acknowledgement may let a commit advance
	closed  chan struct{} // closed by Close
	close1  sync.Once
	release func() // removes the member from members

	mu       sync.Mutex
	gen      int32 // generation whose partitions parts holds; 0 none
	parts    map[int]*groupPartition
	inflight int // records handed out and not acknowledged, all partitions
	stats    GroupStats
}

// GroupStats counts what a member did.
type GroupStats struct {
	Generations int   // generations joined
	Commits     int   // successful offset commits
	Drained     int   // records acknowledged while their partition was being revoked
	Abandoned   int   // records in flight when a revoked partition stopped waiting
	Ignored     int   // acknowledgements of records of partitions not held
	Generation  int32 // the current generation (0: none)
	Draining    bool  // the generation ended and its partitions are draining
	Partitions  []int // the partitions held now
	Lag         int64 // records of the held partitions past their commits
}

// groupPartition is one assigned partition in one generation.
type groupPartition struct {
	id        int
	started   bool           // next is known (the start was resolved)
	revoked   bool           // the generation ended: hand out no more
	next      int64          // next offset to fetch
	buf       []Message      // fetched, not handed out, in offset order
	taken     []int64        // handed out, in order; acknowledged ones are popped from the front
	inflight  map[int64]bool // handed out and not acknowledged
	committed int64          // the group's offset (-1: none)
	hw        int64          // high watermark seen by the last fetch
	assigned  int64          // the offset the assignment came with
}

// commitPoint is the first offset whose output is not known durable: the
// oldest record in flight, else the oldest fetched and not handed out,
// else the next to fetch.
func (p *groupPartition) commitPoint() int64 {
	for len(p.taken) > 0 && !p.inflight[p.taken[0]] {
		p.taken = p.taken[1:]
	}
	switch {
	case len(p.taken) > 0:
		return p.taken[0]
	case len(p.buf) > 0:
		return p.buf[0].Offset
	}
	return p.next
}

// members are the group members of this process by handle
// (beamrun.Registry: JoinGroup registers one, Close releases it); the
// DoFns that read and acknowledge carry the handle.
var members = beamrun.NewRegistry[*GroupMember]("consumer group member")

// memberOf finds a member of this process by handle.
func memberOf(handle string) (*GroupMember, error) {
	if m, ok := members.Find(handle); ok {
		return m, nil
	}
	return nil, fmt.Errorf("kafkaio: consumer group member %q is not in this process: a group read and its acknowledgements run where the member joined (an in-process runner such as prism)", handle)
}

// JoinGroup starts a member of gc.Group on gc.Topic in the background;
// Close leaves the group. Its first partitions come once the group's first
// rebalance is done.
func JoinGroup(gc GroupConfig) (*GroupMember, error) {
	gc = gc.withDefaults()
	if err := gc.Config.Validate(); err != nil {
		return nil, err
	}
	switch {
	case gc.Topic == "":
		return nil, errors.New("kafkaio: group read: no topic")
	case gc.Group == "":
		return nil, errors.New("kafkaio: group read: no group id")
	case gc.HeartbeatInterval >= gc.SessionTimeout:
		return nil, fmt.Errorf("kafkaio: group %s: heartbeat interval %s is not below the session timeout %s", gc.Group, gc.HeartbeatInterval, gc.SessionTimeout)
	case gc.DrainTimeout >= min(gc.SessionTimeout, gc.RebalanceTimeout):
		// A member sends no heartbeat while it drains: the coordinator
		// would evict it before it joins again, and its commits would fail.
		return nil, fmt.Errorf("kafkaio: group %s: drain timeout %s is not below the session and rebalance timeouts (%s, %s)", gc.Group, gc.DrainTimeout, gc.SessionTimeout, gc.RebalanceTimeout)
	}
	d, err := gc.Config.Dialer()
	if err != nil {
		return nil, err
	}
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID: gc.Group, Brokers: gc.Config.Brokers, Dialer: d, Topics: []string{gc.Topic},
		HeartbeatInterval: gc.HeartbeatInterval, SessionTimeout: gc.SessionTimeout, RebalanceTimeout: gc.RebalanceTimeout,
		JoinGroupBackoff: time.Second, StartOffset: kafka.FirstOffset,
		ErrorLogger: kafka.LoggerFunc(func(format string, args ...any) {
			gc.Logf("kafkaio: group %s: "+format, append([]any{gc.Group}, args...)...)
		}),
	})
	if err != nil {
		return nil, fmt.Errorf("kafkaio: group %s: %w", gc.Group, err)
	}
	h := make([]byte, 8)
	rand.Read(h)
	m := &GroupMember{gc: gc, handle: hex.EncodeToString(h), cg: cg,
		rf:   &readFn{RC: ReadConfig{Config: gc.Config, Topic: gc.Topic, MaxWait: gc.MaxWait}},
		done: make(chan struct{}), wake: make(chan struct{}, 1), closed: make(chan struct{})}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.release = members.Register(m.handle, m)
	go m.run()
	return m, nil
}

// Handle names the member in this process (ReadConfig.GroupMember,
// AckGroup).
func (m *GroupMember) Handle() string { return m.handle }

// Close commits what is acknowledged, leaves the group (its partitions go
// to the other members at once, without waiting for the session to
// expire) and releases the member's connections. Records in flight are
// not waited for: their partitions' next owners read them again.
func (m *GroupMember) Close() error {
	m.close1.Do(func() {
		close(m.closed)
		m.cg.Close() // ends the generation (the final commit) and leaves
		m.cancel()
		<-m.done
		m.rf.Teardown()
		m.release()
	})
	return nil
}

// Stats returns the member's counts and current assignment.
func (m *GroupMember) Stats() GroupStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	s.Generation, s.Partitions, s.Lag = m.gen, nil, 0
	for id, p := range m.parts {
		s.Partitions = append(s.Partitions, id)
		s.Draining = s.Draining || p.revoked
		if p.started {
			s.Lag += max(p.hw-p.commitPoint(), 0)
		}
	}
	slices.Sort(s.Partitions)
	return s
}

// run follows the group's generations until Close.
func (m *GroupMember) run() {
	defer close(m.done)
	for {
		gen, err := m.cg.Next(m.ctx)
		if err != nil {
			if errors.Is(err, kafka.ErrGroupClosed) || m.ctx.Err() != nil {
				return
			}
			// kafka-go joins again by itself after a failed join.
			m.gc.Logf("kafkaio: group %s: %v (joining again)", m.gc.Group, err)
			continue
		}
		m.begin(gen)
	}
}

// begin takes the partitions of a new generation: a fetcher each, and the
// committer, which also drains them when the generation ends.
func (m *GroupMember) begin(gen *kafka.Generation) {
	assigned := gen.Assignments[m.gc.Topic]
	parts := make(map[int]*groupPartition, len(assigned))
	var ids []int
	for _, a := range assigned {
		parts[a.ID] = &groupPartition{id: a.ID, inflight: map[int64]bool{}, committed: max(a.Offset, -1), assigned: a.Offset}
		ids = append(ids, a.ID)
	}
	slices.Sort(ids)
	m.mu.Lock()
	m.gen, m.parts = gen.ID, parts
	m.stats.Generations++
	m.mu.Unlock()
	m.gc.Logf("kafkaio: group %s: member %s, generation %d: partitions %v of %s", m.gc.Group, gen.MemberID, gen.ID, ids, m.gc.Topic)
	for _, p := range parts {
		gen.Start(func(ctx context.Context) { m.fetch(ctx, p) })
	}
	gen.Start(func(ctx context.Context) { m.commitLoop(ctx, gen) })
}

// fetch resolves where partition p starts and keeps up to MaxBuffered of
// its records fetched ahead, until the generation ends.
func (m *GroupMember) fetch(ctx context.Context, p *groupPartition) {
	spec := partitionSpec{Topic: m.gc.Topic, Partition: p.id}
	for ctx.Err() == nil {
		start, err := m.start(ctx, p)
		if err == nil {
			m.mu.Lock()
			p.next, p.started = start, true
			m.mu.Unlock()
			break
		}
		if ctx.Err() != nil {
			return
		}
		m.gc.Logf("kafkaio: group %s: %s partition %d: %v (will retry)", m.gc.Group, m.gc.Topic, p.id, err)
		pause(ctx, m.gc.PollInterval)
	}
	for ctx.Err() == nil {
		m.mu.Lock()
		next, full := p.next, len(p.buf) >= m.gc.MaxBuffered
		m.mu.Unlock()
		if full {
			pause(ctx, m.gc.PollInterval)
			continue
		}
		msgs, hw, err := m.rf.fetch(ctx, spec, next)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.gc.Logf("kafkaio: group %s: %v (will retry)", m.gc.Group, err)
			pause(ctx, m.gc.PollInterval)
			continue
		}
		m.mu.Lock()
		if p.revoked {
			m.mu.Unlock()
			return
		}
		for _, r := range msgs {
			p.buf = append(p.buf, Message{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
				Key: r.Key, Value: r.Value, TimeMS: r.Time.UnixMilli()})
			p.next = r.Offset + 1
		}
		p.hw = hw
		m.mu.Unlock()
		if len(msgs) == 0 {
			pause(ctx, m.gc.PollInterval)
		}
	}
}

// start is the first offset of p to read: the group's committed offset,
// or, when the group has none (or one past the partition's end: the topic
// was recreated), the first retained record.
func (m *GroupMember) start(ctx context.Context, p *groupPartition) (int64, error) {
	rc := m.rf.RC
	var pos *positionsFile
	if p.assigned >= 0 {
		pos = &positionsFile{Partitions: map[int]*partitionPositions{p.id: {Next: p.assigned}}}
	}
	var s partitionSpec
	err := rc.Config.Retry.Do(ctx, fmt.Sprintf("start reading %s partition %d", rc.Topic, p.id), func() error {
		c, err := m.rf.conn(ctx, partitionSpec{Topic: rc.Topic, Partition: p.id})
		if err != nil {
			return err
		}
		var stale bool
		s, stale, err = resolvePartition(c, rc, p.id, pos)
		if err != nil {
			m.rf.drop(partitionSpec{Topic: rc.Topic, Partition: p.id})
			return err
		}
		if stale {
			m.gc.Logf("kafkaio: group %s: %s partition %d: the committed offset %d is past the end of the partition (topic recreated?); reading from offset %d",
				m.gc.Group, rc.Topic, p.id, p.assigned, s.Start)
		}
		if stale || p.assigned < 0 {
			// Nothing to commit until a record is done; a commit after a
			// stale one may then be below it.
			m.mu.Lock()
			p.committed = s.Start
			m.mu.Unlock()
		}
		return nil
	})
	return s.Start, err
}

// take hands out up to the member's room under MaxInFlight of the
// fetched records, a share of each held partition in turn, and counts
// them in flight.
func (m *GroupMember) take() []Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	room := m.gc.MaxInFlight - m.inflight
	if room <= 0 || len(m.parts) == 0 {
		return nil
	}
	ids := make([]int, 0, len(m.parts))
	for id, p := range m.parts {
		if !p.revoked && len(p.buf) > 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []Message
	for len(out) < room && len(ids) > 0 {
		kept := ids[:0]
		for _, id := range ids {
			p := m.parts[id]
			if len(out) == room {
				break
			}
			r := p.buf[0]
			p.buf = p.buf[1:]
			p.taken = append(p.taken, r.Offset)
			p.inflight[r.Offset] = true
			out = append(out, r)
			if len(p.buf) > 0 {
				kept = append(kept, id)
			}
		}
		ids = kept
	}
	m.inflight += len(out)
	return out
}

// idle reports that the member holds nothing fetched and nothing is left
// to fetch below the high watermarks of its partitions.
func (m *GroupMember) idle() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.parts {
		if !p.started || len(p.buf) > 0 || p.next < p.hw {
			return false
		}
	}
	return true
}

// ack marks records handed out as acknowledged: their output is durable.
// Acknowledgements of records this member does not hold in flight (their
// partition moved, or it was read again and acknowledged already) change
// nothing.
func (m *GroupMember) ack(ps []Position) {
	m.mu.Lock()
	n := 0
	for _, pos := range ps {
		p := m.parts[pos.Partition]
		if pos.Topic != m.gc.Topic || p == nil || !p.inflight[pos.Offset] {
			m.stats.Ignored++
			continue
		}
		delete(p.inflight, pos.Offset)
		m.inflight--
		n++
		if p.revoked {
			m.stats.Drained++
		}
	}
	m.mu.Unlock()
	if n > 0 {
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
}

// commitLoop commits as acknowledgements arrive; when the generation ends
// it drains the partitions (see GroupMember) and forgets them.
func (m *GroupMember) commitLoop(ctx context.Context, gen *kafka.Generation) {
	for {
		select {
		case <-m.wake:
			m.commit(gen)
		case <-ctx.Done():
			m.drain(gen)
			return
		}
	}
}

// drain stops handing out the generation's records, waits up to
// DrainTimeout (none when the member is closing: nothing will be
// acknowledged any more) for those in flight, committing as they are
// acknowledged, and drops the partitions.
func (m *GroupMember) drain(gen *kafka.Generation) {
	m.mu.Lock()
	if m.gen != gen.ID {
		// The generation ended before this goroutine started (kafka-go
		// then runs it without waiting for it), and the next one may
		// hold the partitions already.
		m.mu.Unlock()
		return
	}
	for _, p := range m.parts {
		if p.started {
			// What was fetched and not handed out is the next owner's:
			// the commit stops at its first record.
			if len(p.buf) > 0 {
				p.next = p.buf[0].Offset
			}
			p.buf = nil
		}
		p.revoked = true
	}
	m.mu.Unlock()
	deadline := time.NewTimer(m.gc.DrainTimeout)
	defer deadline.Stop()
	for {
		m.commit(gen)
		m.mu.Lock()
		n := m.inflight
		m.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-m.wake:
			continue
		case <-deadline.C:
		case <-m.closed:
		}
		m.commit(gen)
		m.mu.Lock()
		n = m.inflight
		m.stats.Abandoned += n
		m.mu.Unlock()
		if n > 0 {
			m.gc.Logf("kafkaio: group %s: generation %d ended with %d records in flight; their partitions' next owners read them again", m.gc.Group, gen.ID, n)
		}
		break
	}
	m.mu.Lock()
	if m.gen == gen.ID {
		m.gen, m.parts, m.inflight = 0, nil, 0
	}
	m.mu.Unlock()
}

// commit commits, for every started partition of gen, its commit point
// when that is past what the group holds.
func (m *GroupMember) commit(gen *kafka.Generation) {
	m.mu.Lock()
	offs := map[int]int64{}
	for id, p := range m.parts {
		if m.gen != gen.ID || !p.started {
			continue
		}
		if c := p.commitPoint(); c > p.committed {
			offs[id] = c
		}
	}
	m.mu.Unlock()
	if len(offs) == 0 {
		return
	}
	if err := gen.CommitOffsets(map[string]map[int]int64{m.gc.Topic: offs}); err != nil {
		// The generation is over at the coordinator (this member was
		// evicted, or a rebalance is completing): the records stay
		// uncommitted and are read again by the partitions' next owners.
		m.gc.Logf("kafkaio: group %s: commit %v in generation %d: %v", m.gc.Group, offs, gen.ID, err)
		return
	}
	m.mu.Lock()
	m.stats.Commits++
	if m.gen == gen.ID {
		for id, c := range offs {
			if p := m.parts[id]; p != nil {
				p.committed = max(p.committed, c)
			}
		}
	}
	m.mu.Unlock()
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// inFlight is the number of records handed out and not acknowledged.
func (m *GroupMember) inFlight() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.inflight
}

// groupReadFn emits the records a GroupMember hands out. The member, not
// the restriction, knows what was read (partitions come and go with the
// group's generations, and a partition may be read again from its
// commit), so the restriction only counts the calls: each claims the next
// number, and a checkpoint resumes after it.
type groupReadFn struct {
	RC ReadConfig
}

func (fn *groupReadFn) CreateInitialRestriction(_ []byte) offsetrange.Restriction {
	return offsetrange.Restriction{Start: 0, End: math.MaxInt64}
}

func (fn *groupReadFn) SplitRestriction(_ []byte, r offsetrange.Restriction) []offsetrange.Restriction {
	return []offsetrange.Restriction{r}
}

func (fn *groupReadFn) RestrictionSize(_ []byte, _ offsetrange.Restriction) float64 { return 1 }

func (fn *groupReadFn) CreateTracker(r offsetrange.Restriction) *sdf.LockRTracker {
	return sdf.NewLockRTracker(&checkpointTracker{offsetrange.NewTracker(r)})
}

// TruncateRestriction drops the rest of the read when the pipeline drains.
func (fn *groupReadFn) TruncateRestriction(rt *sdf.LockRTracker, _ []byte) offsetrange.Restriction {
	start := rt.GetRestriction().(offsetrange.Restriction).Start
	return offsetrange.Restriction{Start: start, End: start}
}

func (fn *groupReadFn) InitialWatermarkEstimatorState(et beam.EventTime, _ offsetrange.Restriction, _ []byte) int64 {
	return int64(et)
}

func (fn *groupReadFn) CreateWatermarkEstimator(ms int64) *watermarkEstimator {
	return &watermarkEstimator{state: ms}
}

func (fn *groupReadFn) WatermarkEstimatorState(we *watermarkEstimator) int64 { return we.state }

func (fn *groupReadFn) ProcessElement(ctx context.Context, we *watermarkEstimator, rt *sdf.LockRTracker, _ []byte, emit func(beam.EventTime, Message)) (sdf.ProcessContinuation, error) {
	m, err := memberOf(fn.RC.GroupMember)
	if err != nil {
		return sdf.StopProcessing(), err
	}
	poll := fn.RC.PollInterval
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	if !rt.TryClaim(rt.GetRestriction().(offsetrange.Restriction).Start) {
		return sdf.StopProcessing(), rt.GetError()
	}
	start := time.Now()
	for {
		msgs := m.take()
		for _, r := range msgs {
			et := beam.EventTime(r.TimeMS)
			we.ObserveTimestamp(et.ToTime())
			emit(et, r)
		}
		if len(msgs) == 0 {
			if m.idle() {
				// Caught up on every partition held (less a small
				// allowance for clock skew between producers).
				we.ObserveTimestamp(time.Now().Add(-time.Second))
			}
			return sdf.ResumeProcessingIn(poll), nil
		}
		if time.Since(start) > maxSlice || ctx.Err() != nil {
			return sdf.ResumeProcessingIn(0), nil
		}
	}
}
