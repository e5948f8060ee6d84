package bincode

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestRoundTrip writes one value of every kind, nil and empty lists and
// maps included, and reads them back in order.
func TestRoundTrip(t *testing.T) {
	var b []byte
	b = AppendString(b, "héllo\x00")
	b = AppendString(b, "")
	b = AppendStrings(b, nil)
	b = AppendStrings(b, []string{})
	b = AppendStrings(b, []string{"a", "", "c"})
	b = AppendStringMap(b, nil)
	b = AppendStringMap(b, map[string]string{})
	b = AppendStringMap(b, map[string]string{"k": "v", "": "empty key"})
	b = AppendInt(b, math.MinInt64)
	b = AppendInts(b, []int{0, -1, math.MaxInt})
	b = AppendInt32s(b, []int32{math.MinInt32, 7})
	b = AppendFloat(b, -0.125)
	b = AppendFloat32s(b, []float32{1.5, float32(math.Inf(1))})
	b = AppendBool(b, true)
	b = AppendCount(b, 2)
	b = AppendBool(b, false)
	b = AppendBool(b, true)
	b = AppendOptCount(b, -1)
	b = AppendFloatMap(b, nil)
	b = AppendFloatMap(b, map[string]float64{})
	b = AppendFloatMap(b, map[string]float64{"a.go": 0.5, "": math.Inf(-1)})
	b = append(b, 3)

	d := NewDecoder(b)
	check := func(name string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", name, got, want)
		}
	}
	check("string", d.String(), "héllo\x00")
	check("empty string", d.String(), "")
	check("nil strings", d.Strings(), []string(nil))
	check("empty strings", d.Strings(), []string{})
	check("strings", d.Strings(), []string{"a", "", "c"})
	check("nil map", d.StringMap(), map[string]string(nil))
	check("empty map", d.StringMap(), map[string]string{})
	check("map", d.StringMap(), map[string]string{"k": "v", "": "empty key"})
	check("int", d.Int64(), int64(math.MinInt64))
	check("ints", d.Ints(), []int{0, -1, math.MaxInt})
	check("int32s", d.Int32s(), []int32{math.MinInt32, 7})
	check("float", d.Float(), -0.125)
	check("float32s", d.Float32s(), []float32{1.5, float32(math.Inf(1))})
	check("bool", d.Bool(), true)
	check("count", d.Count(1), 2)
	check("counted items", [2]bool{d.Bool(), d.Bool()}, [2]bool{false, true})
	n, ok := d.OptCount(1)
	check("nil count", [2]any{n, ok}, [2]any{0, false})
	check("nil float map", d.FloatMap(), map[string]float64(nil))
	check("empty float map", d.FloatMap(), map[string]float64{})
	check("float map", d.FloatMap(), map[string]float64{"a.go": 0.5, "": math.Inf(-1)})
	d.Version(3)
	check("version", d.Err(), nil)
	if err := d.End(); err != nil {
		t.Fatal(err)
	}
}

// TestDamage: short input, a length the input cannot hold, an int32 out of
// range and a bad bool are errors; the first one sticks and later reads
// return zero values.
func TestDamage(t *testing.T) {
	d := NewDecoder(AppendString(nil, "abcdef")[:4])
	if s := d.String(); s != "" || d.Err() == nil {
		t.Errorf("short string: %q, %v", s, d.Err())
	}
	first := d.Err()
	if d.Int64() != 0 || d.Err() != first {
		t.Error("the first error did not stick")
	}

	// A huge length is refused before any allocation.
	d = NewDecoder(AppendCount(nil, math.MaxInt32))
	if m := d.StringMap(); m != nil || d.Err() == nil || !strings.Contains(d.Err().Error(), "exceeds") {
		t.Errorf("huge map: %v, %v", m, d.Err())
	}
	d = NewDecoder(AppendOptCount(nil, 1<<40))
	if xs := d.Float32s(); xs != nil || d.Err() == nil {
		t.Errorf("huge list: %v, %v", xs, d.Err())
	}

	d = NewDecoder(AppendInts(nil, []int{math.MaxInt32 + 1}))
	if d.Int32s(); d.Err() == nil {
		t.Error("int32 out of range accepted")
	}
	d = NewDecoder(AppendOptCount(nil, 2)) // two pairs of at least 9 bytes each: not there
	if m := d.FloatMap(); m != nil || d.Err() == nil || !strings.Contains(d.Err().Error(), "exceeds") {
		t.Errorf("short float map: %v, %v", m, d.Err())
	}
	d = NewDecoder([]byte{2, 7})
	if d.Version(1); d.Err() == nil || !strings.Contains(d.Err().Error(), "version 2, want 1") || d.Len() != 0 {
		t.Errorf("another version: %v, %d bytes left", d.Err(), d.Len())
	}
	d = NewDecoder([]byte{2})
	if d.Bool(); d.Err() == nil {
		t.Error("bool 2 accepted")
	}
	d = NewDecoder(nil)
	if d.Float(); !errors.Is(d.Err(), ErrShort) {
		t.Errorf("empty float: %v", d.Err())
	}
	d = NewDecoder([]byte{1, 2})
	d.Byte()
	if err := d.End(); err == nil {
		t.Error("a trailing byte accepted")
	}
}
