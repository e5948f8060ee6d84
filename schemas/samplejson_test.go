package schemas

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// marshalSample is the reference: encoding/json on the same record.
func marshalSample(t testing.TB, s Sample) ([]byte, error) {
	t.Helper()
	if s.SchemaVersion == 0 {
		s.SchemaVersion = Version
	}
	return json.Marshal(&s)
}

func checkEncoder(t testing.TB, e *SampleEncoder, s Sample) {
	t.Helper()
	want, werr := marshalSample(t, s)
	got, gerr := e.Append(nil, &s)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("Marshal error %v, SampleEncoder error %v", werr, gerr)
	}
	if werr != nil {
		return
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("SampleEncoder differs from json.Marshal:\n got %s\nwant %s", got, want)
	}
}

var trickyStrings = []string{
	"", "plain", `quote " and backslash \`, "<script>&amp;</script>",
	"ctl \x00\x01\x07\b\f\n\r\t\x1f\x7f", "héllo wörld ✓ 🚀", "bad \xff\xfe utf8 \xc3",
	"line\u2028para\u2029end", "trailing \xe2\x80", strings.Repeat("def f():\n\treturn 1\n", 50),
}

var trickyFloats = []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 1.0 / 3, 1e-6, 9.99e-7, 1e-7, -2.5e-9,
	1e20, 1e21, 123456789.125, math.MaxFloat64, math.SmallestNonzeroFloat64, -0.6931471805599453}

func TestSampleEncoderMatchesMarshal(t *testing.T) {
	var e SampleEncoder
	base := Sample{
		Rollout: Rollout{ID: "g/0", InstanceID: "o/r#1", GroupID: "g", GroupSize: 4, Index: 0, PolicyVersion: -1,
			Prompt: "fix the bug", Completion: "<think>x</think>", FinishReason: "stop", LatencyMS: 12, CreatedAt: "2026-11-24T00:00:00Z"},
		Reward: 0.75, Advantage: -1.5, GroupMean: 0.25, GroupStd: 0.5, GroupComplete: true, Repo: "o/r",
	}
	checkEncoder(t, &e, base)
	for _, s := range trickyStrings {
		v := base
		v.ID, v.System, v.Prompt, v.Completion, v.FormatError, v.Repo, v.Source = s, s, s+"p", s, s, s, s
		v.Similarities = map[string]float64{s: 0.5, "a<b": 1, "z": 0}
		checkEncoder(t, &e, v)
	}
	for _, f := range trickyFloats {
		v := base
		v.Reward, v.Advantage, v.GroupMean, v.GroupStd = f, -f, f/3, f*7
		v.LogProbs = []float32{float32(f), float32(-f), float32(f / 3), 1e-7, -3.4e38}
		v.Similarities = map[string]float64{"p": f}
		checkEncoder(t, &e, v)
	}
	v := base
	v.PromptTokens, v.CompletionTokens = []int32{0, -1, math.MaxInt32, math.MinInt32}, []int32{42}
	v.SchemaVersion, v.GroupSize, v.Index, v.PolicyVersion, v.LatencyMS = 7, -3, math.MaxInt, math.MinInt64, math.MaxInt64
	checkEncoder(t, &e, v)
	// Empty but non-nil slices and maps are omitted like nil ones.
	v = base
	v.PromptTokens, v.CompletionTokens, v.LogProbs, v.Similarities = []int32{}, []int32{}, []float32{}, map[string]float64{}
	checkEncoder(t, &e, v)
	// Non-finite numbers fail as Marshal does, naming the field.
	for _, bad := range []func(*Sample){
		func(s *Sample) { s.Reward = math.NaN() },
		func(s *Sample) { s.Advantage = math.Inf(1) },
		func(s *Sample) { s.GroupStd = math.Inf(-1) },
		func(s *Sample) { s.LogProbs = []float32{0, float32(math.Inf(-1))} },
		func(s *Sample) { s.Similarities = map[string]float64{"x": math.NaN()} },
	} {
		v := base
		bad(&v)
		checkEncoder(t, &e, v)
		if _, err := e.Append(nil, &v); err == nil || !strings.Contains(err.Error(), "g/0") {
			t.Errorf("error %v does not name the sample", err)
		}
	}
}

// The encoder reuses a prompt's escaped form only for the same prompt.
func TestSampleEncoderPromptCache(t *testing.T) {
	var e SampleEncoder
	a := Sample{Rollout: Rollout{ID: "a", Prompt: "first <prompt>"}}
	b := Sample{Rollout: Rollout{ID: "b", Prompt: "second \"prompt\""}}
	c := Sample{Rollout: Rollout{ID: "c", Prompt: ""}}
	for _, s := range []Sample{a, a, b, a, c, c, b, c} {
		checkEncoder(t, &e, s)
	}
	// Appending keeps what dst held and a failed append returns it unchanged.
	dst := []byte("prefix")
	out, err := e.Append(dst, &a)
	if err != nil || !bytes.HasPrefix(out, []byte("prefix{")) {
		t.Fatalf("Append to a prefix: %q, %v", out, err)
	}
	bad := a
	bad.Reward = math.NaN()
	if out, err := e.Append(dst, &bad); err == nil || string(out) != "prefix" {
		t.Fatalf("failed Append returned %q, %v", out, err)
	}
}

// Encode of a Sample goes through the encoder and still decodes back.
func TestEncodeSampleRoundTrip(t *testing.T) {
	s := Sample{Rollout: Rollout{ID: "g/1", Prompt: "p\u2028", Completion: "c\xff", LogProbs: []float32{-0.5}},
		Reward: 1, Similarities: map[string]float64{"a.go": 1}, Advantage: 0.5}
	b, err := Encode(&s)
	if err != nil {
		t.Fatal(err)
	}
	var back Sample
	if err := Decode(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.ID != s.ID || back.Prompt != s.Prompt || back.Completion != "c\ufffd" || back.Similarities["a.go"] != 1 || back.SchemaVersion != Version {
		t.Fatalf("round trip: %+v", back)
	}
}

func FuzzSampleEncoder(f *testing.F) {
	f.Add("g/0", "prompt <x>", "completion \n", "", 0.5, -1.5, []byte{1, 2, 3, 4, 5, 6, 7, 8}, int64(3))
	f.Add("\xff", "\u2028", "\x00", "err & more", math.Inf(1), 1e-7, []byte{}, int64(-1))
	f.Fuzz(func(t *testing.T, id, prompt, completion, ferr string, reward, adv float64, raw []byte, version int64) {
		var e SampleEncoder
		s := Sample{Rollout: Rollout{ID: id, GroupID: id, Prompt: prompt, Completion: completion, PolicyVersion: version},
			Reward: reward, Advantage: adv, FormatError: ferr, Repo: completion}
		for len(raw) >= 4 {
			u := binary.LittleEndian.Uint32(raw)
			s.CompletionTokens = append(s.CompletionTokens, int32(u))
			s.LogProbs = append(s.LogProbs, math.Float32frombits(u))
			raw = raw[4:]
		}
		if len(raw) > 0 {
			s.Similarities = map[string]float64{id: reward, string(raw): adv}
		}
		checkEncoder(t, &e, s)
		// The same prompt again (cached) and a different one.
		s.ID = prompt
		checkEncoder(t, &e, s)
		s.Prompt = completion
		checkEncoder(t, &e, s)
	})
}
