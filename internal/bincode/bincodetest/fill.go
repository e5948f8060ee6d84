// Package bincodetest helps test hand-written binary coders.
package bincodetest

import (
	"fmt"
	"reflect"
	"testing"
)

// Fill sets every field reachable from v (settable, e.g. the Elem of a
// pointer) to a value that is not its zero value and differs from field to
// field, so a coder that drops or swaps a field cannot give the value back.
// A kind it has no rule for fails the test.
func Fill(t testing.TB, v reflect.Value) {
	t.Helper()
	seed := 0
	fill(t, v, &seed)
}

func fill(t testing.TB, v reflect.Value, seed *int) {
	t.Helper()
	*seed++
	n := *seed
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fill(t, v.Field(i), seed)
		}
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d-é\x00\n", n))
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(int64(n) * -1000003)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(n) + 0.125)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 3, 3)
		for i := range 3 {
			fill(t, s.Index(i), seed)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(t, k, seed)
			fill(t, e, seed)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	default:
		t.Fatalf("fill: no rule for a %s (%s): teach Fill and the coder", v.Kind(), v.Type())
	}
}
