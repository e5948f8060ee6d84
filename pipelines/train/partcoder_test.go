package train

import (
	"encoding/json"
	"reflect"
	"testing"

	"swerl/internal/bincode/bincodetest"
	"swerl/schemas"
)

// TestPartCoderCarriesEveryField round-trips a part whose every field, and
// every field of its samples, is set: a field added to part, member or
// schemas.Sample but not to the coder fails here.
func TestPartCoderCarriesEveryField(t *testing.T) {
	var p part
	bincodetest.Fill(t, reflect.ValueOf(&p).Elem())
	b, err := encodePart(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodePart(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, p) {
		gj, _ := json.Marshal(got)
		pj, _ := json.Marshal(p)
		t.Fatalf("round trip changed the part:\n got %s\nwant %s", gj, pj)
	}
}

// TestPartCoderKeepsNilAndEmpty: nil and empty maps and lists stay apart
// (JSON's omitempty would have merged them), and a zero part round-trips.
func TestPartCoderKeepsNilAndEmpty(t *testing.T) {
	for _, p := range []part{
		{},
		{Files: map[string]string{}, Members: []member{{Sample: schemas.Sample{Similarities: map[string]float64{},
			Rollout: schemas.Rollout{PromptTokens: []int32{}, LogProbs: []float32{}}}}}},
		{Oracle: map[string]string{"": ""}, Members: []member{{Lost: "x"}, {}}},
	} {
		b, _ := encodePart(p)
		got, err := decodePart(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, p) {
			t.Fatalf("round trip of %+v gave %+v", p, got)
		}
	}
}

// TestPartCoderRejectsDamage: every truncation and a wrong version are
// errors, never a panic or a silently shorter part.
func TestPartCoderRejectsDamage(t *testing.T) {
	var p part
	bincodetest.Fill(t, reflect.ValueOf(&p).Elem())
	b, _ := encodePart(p)
	for n := range len(b) {
		if _, err := decodePart(b[:n]); err == nil {
			t.Fatalf("decoding the first %d of %d bytes succeeded", n, len(b))
		}
	}
	if _, err := decodePart(append(b[:len(b):len(b)], 0)); err == nil {
		t.Fatal("trailing byte accepted")
	}
	bad := append([]byte{}, b...)
	bad[0] = partCoderVersion + 1
	if _, err := decodePart(bad); err == nil {
		t.Fatal("unknown version accepted")
	}
}

// FuzzDecodePart: arbitrary bytes never panic the part decoder, and what
// it accepts encodes to bytes that decode to the same part.
func FuzzDecodePart(f *testing.F) {
	var p part
	bincodetest.Fill(f, reflect.ValueOf(&p).Elem())
	b, _ := encodePart(p)
	f.Add(b)
	z, _ := encodePart(part{})
	f.Add(z)
	f.Add([]byte{partCoderVersion, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodePart(b)
		if err != nil {
			return
		}
		again, err := encodePart(got)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodePart(again)
		if err != nil {
			t.Fatalf("re-encoded part does not decode: %v", err)
		}
		if !reflect.DeepEqual(back, got) && !hasNaN(got) {
			t.Fatalf("re-encoding changed the part")
		}
	})
}

// hasNaN says whether a float in p is NaN (NaN != NaN defeats DeepEqual).
func hasNaN(p part) bool {
	for _, m := range p.Members {
		s := m.Sample
		fs := []float64{s.Reward, s.Advantage, s.GroupMean, s.GroupStd}
		for _, f := range s.Similarities {
			fs = append(fs, f)
		}
		for _, f := range s.LogProbs {
			fs = append(fs, float64(f))
		}
		for _, f := range fs {
			if f != f {
				return true
			}
		}
	}
	return false
}
