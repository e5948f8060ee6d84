package schemas

import (
	"reflect"

	"swerl/internal/jsonscan"
)

// The one-pass decoder of Instance's JSON (fastInstance, readInstanceJSON)
// is generated from the struct (jsoncodec_gen.go). The train pipeline spent
// a tenth of its CPU decoding instances with encoding/json before it
// existed. FuzzDecodeInstance holds it to json.Unmarshal.

// readJSONInt reads an integer literal into an int (what encoding/json
// accepts for an int field, on a 64-bit platform).
func readJSONInt(p *jsonscan.Scanner) (int, bool) {
	n, ok := p.Int()
	return int(n), ok
}

// decodeInstanceFast is fastInstance for Decode, starting from an Instance
// whose version is start (see Decode): only into a zero Instance, as
// encoding/json merges into what r holds.
func decodeInstanceFast(data []byte, r *Instance, start int) bool {
	if !reflect.ValueOf(r).Elem().IsZero() {
		return false
	}
	in, ok := fastInstance(data, Instance{SchemaVersion: start})
	if ok {
		*r = in
	}
	return ok
}
