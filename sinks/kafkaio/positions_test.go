package kafkaio

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"swerl/sinks/kafkaio/kafkatest"
)

func TestPositionsAdvanceOverContiguousAcks(t *testing.T) {
	dir := t.TempDir()
	if err := updatePositions(dir, "in", posUpdate{Base: map[int]int64{0: 10, 1: 0}}); err != nil {
		t.Fatal(err)
	}
	// Out of order: 12 and 14 before 10, 11.
	if err := updatePositions(dir, "in", posUpdate{Acked: map[int][]int64{0: {12, 14, 3}}}); err != nil {
		t.Fatal(err)
	}
	f, _ := loadPositions(dir, "in")
	if pp := f.Partitions[0]; pp.Next != 10 || !reflect.DeepEqual(pp.Done, []int64{12, 14}) {
		t.Fatalf("after out-of-order acks: %+v", pp)
	}
	if err := updatePositions(dir, "in", posUpdate{Base: map[int]int64{0: 0}, Acked: map[int][]int64{0: {11, 10, 10}, 1: {0, 1, 2}, 5: {7}}}); err != nil {
		t.Fatal(err)
	}
	f, _ = loadPositions(dir, "in")
	if pp := f.Partitions[0]; pp.Next != 13 || !reflect.DeepEqual(pp.Done, []int64{14}) {
		t.Fatalf("a base given again must not move a partition back, and 10-12 are contiguous: %+v", pp)
	}
	got, err := LoadPositions(dir, "in")
	if err != nil || !reflect.DeepEqual(got, map[int]int64{0: 13, 1: 3, 5: 8}) {
		t.Fatalf("%v %v", got, err)
	}
	if skip := f.Partitions[0].doneFrom(13); !reflect.DeepEqual(skip, []int64{14}) {
		t.Fatal(skip)
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("dir holds %d entries", len(ents))
	}
}

func TestPositionsFileErrors(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(positionsPath(dir, "in"), []byte("{"), 0o644)
	if _, err := LoadPositions(dir, "in"); err == nil || !strings.Contains(err.Error(), "positions-in.json") {
		t.Errorf("corrupt file: %v", err)
	}
	os.WriteFile(positionsPath(dir, "in"), []byte(`{"topic":"other"}`), 0o644)
	if _, err := LoadPositions(dir, "in"); err == nil || !strings.Contains(err.Error(), "other") {
		t.Errorf("wrong topic: %v", err)
	}
	if got, err := LoadPositions(filepath.Join(dir, "none"), "in"); err != nil || len(got) != 0 {
		t.Errorf("missing dir: %v %v", got, err)
	}
}

// Saved positions resume a read on the same cluster; against a new
// cluster (a new embedded broker) or past the end of a recreated
// partition they are discarded, so nothing is skipped.
func TestPositionsBelongToTheirCluster(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	prefix := kafkatest.Prefix(t)
	in := Config{TopicPrefix: prefix}.Topic("in")
	scan := func(c Config) int {
		n := 0
		if err := Scan(ctx, ReadConfig{Config: c, Topic: in, PositionsDir: dir}, func(Message) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	a := startBrokerWith(t, prefix, 3, "in")
	produce(t, a, in, 0, 30)
	if n := scan(a); n != 30 {
		t.Fatalf("first scan: %d records", n)
	}
	// Acknowledge everything the scan saw.
	acked := map[int][]int64{}
	Scan(ctx, ReadConfig{Config: a, Topic: in}, func(m Message) error {
		acked[m.Partition] = append(acked[m.Partition], m.Offset)
		return nil
	})
	if err := updatePositions(dir, in, posUpdate{Acked: acked}); err != nil {
		t.Fatal(err)
	}
	if n := scan(a); n != 0 {
		t.Fatalf("after acknowledging everything, a scan read %d records again", n)
	}
	produce(t, a, in, 30, 6)
	if n := scan(a); n != 6 {
		t.Fatalf("resumed scan read %d records, want the 6 new ones", n)
	}

	b := newCluster(t, prefix, 3, "in") // a new cluster with the same topic
	produce(t, b, in, 0, 12)
	if n := scan(b); n != 12 {
		t.Fatalf("positions of another cluster skipped records: %d of 12 read", n)
	}
	f, _ := loadPositions(dir, in)
	idB, _ := ClusterID(ctx, b)
	idA, _ := ClusterID(ctx, a)
	if f.ClusterID != idB || idA == idB {
		t.Fatalf("positions file cluster %q; clusters %q and %q", f.ClusterID, idA, idB)
	}
	// A position beyond the end of a partition (recreated topic) is
	// ignored for that partition only.
	var parts []int
	acked = map[int][]int64{}
	Scan(ctx, ReadConfig{Config: b, Topic: in}, func(m Message) error {
		acked[m.Partition] = append(acked[m.Partition], m.Offset)
		if m.Partition == 0 {
			parts = append(parts, 0)
		}
		return nil
	})
	if err := updatePositions(dir, in, posUpdate{Acked: acked}); err != nil {
		t.Fatal(err)
	}
	if n := scan(b); n != 0 {
		t.Fatalf("after acknowledging everything on the new cluster, a scan read %d records", n)
	}
	if err := updatePositions(dir, in, posUpdate{Force: map[int]int64{0: 1000}}); err != nil {
		t.Fatal(err)
	}
	if n := scan(b); n != len(parts) {
		t.Fatalf("stale position: read %d records, want partition 0's %d", n, len(parts))
	}
}

func TestScanMissingTopic(t *testing.T) {
	c := startBroker(t, "in")
	err := Scan(context.Background(), ReadConfig{Config: c, Topic: c.Topic("nope")}, func(Message) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("scan of a missing topic: %v", err)
	}
}

// Any bytes in a positions file give an error naming the file or a usable
// file, never a panic: a loaded file can be acknowledged into and read
// back.
func FuzzPositionsFile(f *testing.F) {
	for _, seed := range []string{
		`{"topic":"in","cluster_id":"c1","partitions":{"0":{"next":5,"done":[7,9]},"3":{"next":0}}}`,
		`{"topic":"in","partitions":{"0":null}}`,
		`{"topic":"in","partitions":{"-1":{"next":1}}}`,
		`{"topic":"in","partitions":{"0":{"next":-4}}}`,
		`{"topic":"in","partitions":{"0":{"next":9,"done":[3]}}}`,
		`{"topic":"in","partitions":{"0":{"next":9223372036854775807,"done":[9223372036854775807]}}}`,
		`{"topic":"in","partitions":{"x":{"next":1}}}`,
		`{"topic":"in"}`, `{"topic":"other"}`, `null`, `[]`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		path := positionsPath(dir, "in")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		pos, err := LoadPositions(dir, "in")
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("the error does not name the file: %v", err)
			}
			return
		}
		for p, next := range pos {
			// An acknowledgement of the next offset and of one past it.
			ack := []int64{next}
			if next < math.MaxInt64 {
				ack = append(ack, next+1)
			}
			if err := updatePositions(dir, "in", posUpdate{Acked: map[int][]int64{p: ack}}); err != nil {
				t.Fatalf("acknowledging into a file that loaded: %v", err)
			}
		}
		if _, err := LoadPositions(dir, "in"); err != nil {
			t.Fatalf("a file rewritten by updatePositions does not load: %v", err)
		}
	})
}
