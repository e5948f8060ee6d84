package kafkaio

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/segmentio/kafka-go"

	"swerl/internal/testenv"
	"swerl/sinks/kafkaio/kafkatest"
)

// produceTo writes n records to one partition of topic.
func produceTo(t testing.TB, c Config, topic string, partition, n int) {
	t.Helper()
	conn, err := kafka.DialLeader(context.Background(), "tcp", c.Brokers[0], topic, partition)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: fmt.Appendf(nil, "p%d-%d", partition, i), Value: fmt.Appendf(nil, "value-%d", i)}
	}
	if _, err := conn.WriteMessages(msgs...); err != nil {
		t.Fatal(err)
	}
}

// committed returns the group's committed offset of every partition of
// topic (-1: none).
func committed(t testing.TB, c Config, group, topic string, parts ...int) map[int]int64 {
	t.Helper()
	return kafkatest.Committed(t, c.Brokers[0], group, topic, parts...)
}

// taker collects what a member hands out.
type taker struct {
	m    *GroupMember
	mu   sync.Mutex
	got  map[int][]int64 // partition → offsets, in the order handed out
	nGot int
}

func (tk *taker) poll() int {
	msgs := tk.m.take()
	tk.mu.Lock()
	defer tk.mu.Unlock()
	for _, r := range msgs {
		tk.got[r.Partition] = append(tk.got[r.Partition], r.Offset)
	}
	tk.nGot += len(msgs)
	return tk.nGot
}

func acks(topic string, partition int, offsets ...int64) []Position {
	var ps []Position
	for _, o := range offsets {
		ps = append(ps, Position{Topic: topic, Partition: partition, Offset: o})
	}
	return ps
}

func span(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

// A consumer group member commits a partition only up to its first record
// not yet acknowledged (acknowledgements out of order wait for the gap);
// when a second member joins, the first stops handing out records, commits
// what is acknowledged while its partitions drain, and gives up on the
// rest after DrainTimeout; the partition's new owner starts at that
// commit, so the records acknowledged during the drain are not read again
// and those abandoned are; a late acknowledgement of an abandoned record
// changes nothing, and no commit ever moves back.
func TestGroupCommitsOnlyDurableAndDrainsOnRevoke(t *testing.T) {
	const n = 10
	c := startBrokerWith(t, kafkatest.Prefix(t), 2, "in")
	topic, group := c.Topic("in"), c.Topic("workers")
	produceTo(t, c, topic, 0, n)
	produceTo(t, c, topic, 1, n)

	var hist []map[int]int64 // every commit state observed, in order
	check := func(what string, want map[int]int64) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, what, func() bool {
			got := committed(t, c, group, topic, 0, 1)
			if len(hist) == 0 || !mapsEqual(hist[len(hist)-1], got) {
				hist = append(hist, got)
			}
			if !mapsEqual(got, want) && testing.Verbose() {
				t.Logf("committed %v", got)
			}
			return mapsEqual(got, want)
		})
	}
	gc := GroupConfig{Config: c, Topic: topic, Group: group, SessionTimeout: 6 * time.Second, RebalanceTimeout: 20 * time.Second,
		DrainTimeout: 4 * time.Second, PollInterval: 20 * time.Millisecond, MaxWait: 50 * time.Millisecond, Logf: t.Logf}
	a, err := JoinGroup(gc)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ta := &taker{m: a, got: map[int][]int64{}}
	testenv.Eventually(t, 30*time.Second, "the first member hands out both partitions", func() bool { return ta.poll() == 2*n })
	for p := range 2 {
		if !slices.Equal(ta.got[p], span(0, n)) {
			t.Fatalf("partition %d handed out %v, want 0..%d in order", p, ta.got[p], n-1)
		}
	}
	if a.inFlight() != 2*n {
		t.Fatalf("%d records in flight, want %d", a.inFlight(), 2*n)
	}

	// Out of order: 0, 1 and 3 of partition 0 are durable, 2 is not.
	a.ack(acks(topic, 0, 0, 1, 3))
	check("partition 0 committed up to its first unacknowledged record", map[int]int64{0: 2, 1: -1})
	a.ack(acks(topic, 0, 2))
	check("the gap filled, partition 0 committed past 3", map[int]int64{0: 4, 1: -1})

	// A second member joins: the first drains. Acknowledge the rest of
	// partition 0 and half of partition 1 while it waits; 5..9 of
	// partition 1 stay in flight past DrainTimeout.
	bm, err := JoinGroup(gc)
	if err != nil {
		t.Fatal(err)
	}
	defer bm.Close()
	testenv.Eventually(t, 30*time.Second, "the first member drains its revoked partitions", func() bool { return a.Stats().Draining })
	a.ack(append(acks(topic, 0, span(4, n)...), acks(topic, 1, span(0, 5)...)...))
	check("the drain committed what was acknowledged during it", map[int]int64{0: n, 1: 5})

	tb := &taker{m: bm, got: map[int][]int64{}}
	testenv.Eventually(t, 30*time.Second, "the abandoned records of partition 1 are handed out again", func() bool {
		return ta.poll()+tb.poll() == 2*n+5
	})
	sa, sb := a.Stats(), bm.Stats()
	if len(sa.Partitions) != 1 || len(sb.Partitions) != 1 || sa.Generation != sb.Generation {
		t.Fatalf("after the rebalance: first member %+v, second %+v; want one partition each in one generation", sa, sb)
	}
	if sa.Drained != n-4+5 || sa.Abandoned != 5 {
		t.Fatalf("first member drained %d and abandoned %d records, want %d and 5", sa.Drained, sa.Abandoned, n-4+5)
	}
	owner, other := a, bm
	again := ta.got[1][n:]
	if sb.Partitions[0] == 1 {
		owner, other, again = bm, a, tb.got[1]
	}
	if !slices.Equal(again, span(5, n)) {
		t.Fatalf("partition 1's new owner was handed %v, want 5..9 (its commit on)", again)
	}
	if len(ta.got[0]) != n || len(tb.got[0]) != 0 {
		t.Fatalf("partition 0 was handed out again (%v, %v) though its commit covers it", ta.got[0], tb.got[0])
	}

	// A late acknowledgement from the member that does not hold
	// partition 1 is ignored, then the owner's own acknowledgements commit
	// the rest.
	ignored := other.Stats().Ignored
	other.ack(acks(topic, 1, 7))
	if other.Stats().Ignored != ignored+1 {
		t.Fatalf("a member acknowledged a record of a partition it does not hold")
	}
	owner.ack(acks(topic, 1, span(5, n)...))
	check("the new owner commits the rest", map[int]int64{0: n, 1: n})

	// Leaving: the member is gone from the group as soon as Close returns
	// (no wait for its session to expire), and the other takes over with
	// nothing to read.
	bm.Close()
	if n := groupMembers(t, c, group); n != 1 {
		t.Fatalf("the group has %d members after one of two left, want 1", n)
	}
	testenv.Eventually(t, 30*time.Second, "the remaining member holds both partitions, caught up", func() bool {
		return len(a.Stats().Partitions) == 2 && a.idle()
	})
	if before := ta.nGot; ta.poll() != before {
		t.Fatalf("the remaining member handed out records already committed")
	}
	for i := 1; i < len(hist); i++ {
		for p, o := range hist[i] {
			if o < hist[i-1][p] {
				t.Fatalf("partition %d's commit moved back: %v", p, hist)
			}
		}
	}
	t.Logf("commits observed: %v; first member %+v", hist, a.Stats())
}

// groupMembers is the number of members the coordinator lists for group.
func groupMembers(t testing.TB, c Config, group string) int {
	t.Helper()
	cl := &kafka.Client{Addr: kafka.TCP(c.Brokers...)}
	resp, err := cl.DescribeGroups(context.Background(), &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err != nil || len(resp.Groups) != 1 || resp.Groups[0].Error != nil {
		t.Fatalf("describe group %s: %v %+v", group, err, resp)
	}
	return len(resp.Groups[0].Members)
}

func mapsEqual(a, b map[int]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// On Prism: an unbounded Read as a group member writes every record of
// the topic (records produced before and while it runs) to another topic,
// AckOriginsGroup acknowledges them once written, and the group's commits
// reach the end of every partition; cancelling the pipeline and closing
// the member leaves the group.
func TestGroupReadOnPrism(t *testing.T) {
	c := startBroker(t, "in", "out")
	tin, tout := c.Topic("in"), c.Topic("out")
	group := c.Topic("prism")
	produce(t, c, tin, 0, 30)
	m, err := JoinGroup(GroupConfig{Config: c, Topic: tin, Group: group, SessionTimeout: 6 * time.Second,
		PollInterval: 20 * time.Millisecond, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p, s := beam.NewPipelineWithRoot()
	msgs := Read(s, ReadConfig{Config: c, Topic: tin, GroupMember: m.Handle(), PollInterval: 20 * time.Millisecond})
	AckOriginsGroup(s, m.Handle(), WriteAcked(s, WriteConfig{Config: c, Topic: tout}, beam.ParDo(s, relabelWithOrigin, msgs)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runPipeline(t, ctx, p) }()
	defer func() {
		cancel()
		<-done
	}()
	ends := func() map[int]int64 { return kafkatest.EndOffsets(t, c.Brokers[0], tin, 0, 1, 2) }
	testenv.Eventually(t, time.Minute, "the group's commits reach the end of the first 30 records", func() bool {
		return mapsEqual(committed(t, c, group, tin, 0, 1, 2), ends())
	})
	produce(t, c, tin, 30, 30)
	testenv.Eventually(t, time.Minute, "the group's commits reach the end of 30 more, produced while it runs", func() bool {
		return mapsEqual(committed(t, c, group, tin, 0, 1, 2), ends())
	})
	out := consumeAll(t, c, tout, 60, time.Minute)
	seen := map[string]bool{}
	for _, r := range out {
		src, _, _ := strings.Cut(string(r.Value), " ")
		seen[src] = true
	}
	if len(seen) != 60 {
		t.Fatalf("%d distinct records written (%d in all), want 60", len(seen), len(out))
	}
	if st := m.Stats(); st.Commits == 0 || st.Lag != 0 {
		t.Fatalf("member stats %+v", st)
	}
}

func TestJoinGroupRefusesBadConfig(t *testing.T) {
	c := Config{Brokers: []string{"127.0.0.1:1"}}
	for _, gc := range []GroupConfig{
		{Config: c, Group: "g"},
		{Config: c, Topic: "t"},
		{Topic: "t", Group: "g"},
		{Config: c, Topic: "t", Group: "g", SessionTimeout: 6 * time.Second, HeartbeatInterval: 6 * time.Second},
		{Config: c, Topic: "t", Group: "g", SessionTimeout: 6 * time.Second, DrainTimeout: 6 * time.Second},
		{Config: c, Topic: "t", Group: "g", RebalanceTimeout: 2 * time.Second, DrainTimeout: 3 * time.Second},
	} {
		if m, err := JoinGroup(gc); err == nil {
			m.Close()
			t.Errorf("%+v: joined", gc)
		}
	}
}
