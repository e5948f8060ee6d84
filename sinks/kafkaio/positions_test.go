package kafkaio

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestPositionsAdvanceOverContiguousAcks(t *testing.T) {
	dir := t.TempDir()
	if err := updatePositions(dir, "in", map[int]int64{0: 10, 1: 0}, nil); err != nil {
		t.Fatal(err)
	}
	// Out of order: 12 and 14 before 10, 11.
	if err := updatePositions(dir, "in", nil, map[int][]int64{0: {12, 14, 3}}); err != nil {
		t.Fatal(err)
	}
	f, _ := loadPositions(dir, "in")
	if pp := f.Partitions[0]; pp.Next != 10 || !reflect.DeepEqual(pp.Done, []int64{12, 14}) {
		t.Fatalf("after out-of-order acks: %+v", pp)
	}
	if err := updatePositions(dir, "in", map[int]int64{0: 0}, map[int][]int64{0: {11, 10, 10}, 1: {0, 1, 2}, 5: {7}}); err != nil {
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
