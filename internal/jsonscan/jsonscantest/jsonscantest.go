// Package jsonscantest holds the differential check of the one-pass JSON
// decoders built on package jsonscan: a fast decoder may give up on any
// input, but where it decodes one, encoding/json must accept it and give
// the same value.
package jsonscantest

import (
	"encoding/json"
	"reflect"
	"testing"
)

// Agrees reports whether fast decoded b. Where it did, the test fails
// unless slow (the encoding/json reading) accepts b and gives a deeply
// equal value.
func Agrees[T any](t testing.TB, b []byte, fast func([]byte) (T, bool), slow func([]byte) (T, error)) bool {
	t.Helper()
	got, ok := fast(b)
	if !ok {
		return false
	}
	want, err := slow(b)
	if err != nil {
		t.Fatalf("%q: fast decoder accepted what encoding/json rejects: %v", b, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: fast decoder gave\n%+v\nencoding/json\n%+v", b, got, want)
	}
	return true
}

// Unmarshal is json.Unmarshal of b into a zero T: the slow reading for
// Agrees when the fast decoder starts from a zero value.
func Unmarshal[T any](b []byte) (T, error) {
	var v T
	err := json.Unmarshal(b, &v)
	return v, err
}
