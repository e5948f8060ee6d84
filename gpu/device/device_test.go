package device

import (
	"slices"
	"testing"
)

// Every build has cpu, and it opens; a name no file registered is not
// found.
func TestRegistry(t *testing.T) {
	if !slices.Contains(Names(), "cpu") || !slices.IsSorted(Names()) {
		t.Fatalf("Names: %v", Names())
	}
	open, ok := Lookup("cpu")
	if !ok {
		t.Fatal("cpu: not found")
	}
	if be, err := open(); err != nil || be == nil {
		t.Fatalf("cpu: %v, %v", be, err)
	}
	if _, ok := Lookup("tpu"); ok {
		t.Error("tpu: found")
	}
}
