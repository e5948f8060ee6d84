package main

import (
	"swerl/internal/jsonscan/jsonscantest"
	"testing"
)

// checkFastWire: where fastRewardWire decodes b, json.Unmarshal accepts b
// and gives the same rewardWire.
func checkFastWire(t *testing.T, b []byte) bool {
	t.Helper()
	return jsonscantest.Agrees(t, b, fastRewardWire, jsonscantest.Unmarshal[rewardWire])
}

func TestFastRewardWire(t *testing.T) {
	accept := []string{
		`{}`,
		` {"id":"a","output":"x\n\"y\"\\\/\b\f\r\tz","mode":"m"} ` + "\n",
		`{"id":"\u00e9\u65e5\ud83d\ude00é日😀","code_context":{"a.py":"1\n","b\u00e9":""},"oracle_new_content":{}}`,
		`{"oracle_patches":[],"pred_patches":["p","q\u0041"]}`,
		`{"expected_reward":-0.25e+3,"kind":"x","n":[1,0.5,true,false,null,{"a":[{}]},[]],"z":{"k":"v"},"id":"i","output":""}`,
		`{"id":"a","extra":null,"output":"o"}`,
		`{"id":null,"pred_patches":null,"output":null,"code_context":null}`,
	}
	for _, s := range accept {
		if !checkFastWire(t, []byte(s)) {
			t.Errorf("%s: fast decoder gave up", s)
		}
	}
	// Left to encoding/json: valid with other semantics, or malformed.
	giveUp := []string{
		`{"ID":"a"}`, `{"id":"a","id":"b"}`, `{"output":"\ud83d"}`,
		`{"output":"\udc00x"}`, "{\"output\":\"\xff\"}", `{"output":"a` + "\x01" + `"}`,
		`{"code_context":{"a":null}}`, `{"pred_patches":[null]}`, `{"id":1}`,
		`{"id":"a"} x`, `{"id":"a",}`, `{"x":01}`, `{"x":1.}`, `{"x":-}`, `{"x":tru}`,
		`{"output":"\x"}`, `{"output":"\u12"}`, `{"id":"a"`, `[]`, ``,
	}
	for _, s := range giveUp {
		if checkFastWire(t, []byte(s)) {
			t.Errorf("%s: fast decoder did not give up", s)
		}
	}
}

// TestFastRewardWireConformance: every line of the shared corpus takes the
// fast path and decodes as encoding/json decodes it.
func TestFastRewardWireConformance(t *testing.T) {
	for _, name := range conformanceFiles {
		eachConformanceLine(t, name, func(i int, line []byte) {
			if !checkFastWire(t, line) {
				t.Errorf("%s:%d: fast decoder gave up", name, i+1)
			}
		})
	}
}

func FuzzFastRewardWire(f *testing.F) {
	f.Add([]byte(`{"id":"a","output":"x\n\u00e9\ud83d\ude00","code_context":{"a":"b"},"k":[1,{"z":null}]}`))
	f.Add([]byte(`{"oracle_patches":["a"],"pred_patches":[],"mode":"unidiff","e":-1.5E-2}`))
	f.Add([]byte(`{"Output":"x","id":"\udc00"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkFastWire(t, b)
	})
}
