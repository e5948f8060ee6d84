package train

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"swerl/schemas"
)

// The part coder is the pipeline's one shuffle coder: every group crosses
// the data plane once as a part (reward stage → group stage), so it is
// written by hand in a compact binary form instead of JSON. Measured on the
// train benchmark's profile, JSON encode and decode of parts took about a
// seventh of the pipeline's CPU. Parts never leave a running pipeline (Kafka
// and Parquet carry samples as JSON and Parquet rows), so the format only
// has to agree with itself; its first byte is a version all the same.
//
// Layout: version, then the part's strings and maps, then the members, each
// a Lost string and a sample. Integers are varints, floats their IEEE bits
// (8 or 4 bytes, little-endian), strings and lists length-prefixed, maps a
// count and their pairs (in map order: parts are values, never keys, so the
// encoding need not be deterministic).
const partCoderVersion = 1

func encodePart(v part) ([]byte, error) {
	n := 64 + len(v.GroupID) + len(v.Origin) + len(v.System) + len(v.Prompt) + mapLen(v.Files) + mapLen(v.Oracle)
	for i := range v.Members {
		s := &v.Members[i].Sample
		n += 160 + len(s.ID) + len(s.InstanceID) + len(s.GroupID) + len(s.System) + len(s.Prompt) + len(s.Completion) +
			5*len(s.PromptTokens) + 5*len(s.CompletionTokens) + 4*len(s.LogProbs) + len(v.Members[i].Lost)
	}
	b := make([]byte, 0, n)
	b = append(b, partCoderVersion)
	b = appendString(b, v.GroupID)
	b = appendString(b, v.Origin)
	b = appendString(b, v.System)
	b = appendString(b, v.Prompt)
	b = appendStringMap(b, v.Files)
	b = appendStringMap(b, v.Oracle)
	b = binary.AppendUvarint(b, uint64(len(v.Members)))
	for i := range v.Members {
		b = appendString(b, v.Members[i].Lost)
		b = appendSample(b, &v.Members[i].Sample)
	}
	return b, nil
}

func decodePart(b []byte) (part, error) {
	var v part
	d := decoder{b: b}
	if ver := d.byte(); d.err == nil && ver != partCoderVersion {
		return v, fmt.Errorf("train: part coder version %d, want %d", ver, partCoderVersion)
	}
	v.GroupID = d.string()
	v.Origin = d.string()
	v.System = d.string()
	v.Prompt = d.string()
	v.Files = d.stringMap()
	v.Oracle = d.stringMap()
	if n := d.count(2); n > 0 {
		v.Members = make([]member, n)
		for i := range v.Members {
			v.Members[i].Lost = d.string()
			d.sample(&v.Members[i].Sample)
		}
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes after the part", len(d.b))
	}
	if d.err != nil {
		return part{}, fmt.Errorf("train: decoding a part: %w", d.err)
	}
	return v, nil
}

func mapLen(m map[string]string) int {
	n := 0
	for k, v := range m {
		n += len(k) + len(v) + 4
	}
	return n
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendStringMap(b []byte, m map[string]string) []byte {
	if m == nil {
		return append(b, 0)
	}
	// A nil map is 0, an empty one 1: the count is stored plus one.
	b = binary.AppendUvarint(b, uint64(len(m))+1)
	for k, v := range m {
		b = appendString(b, k)
		b = appendString(b, v)
	}
	return b
}

func appendFloat(b []byte, f float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
}

// appendSample writes every field of s; TestPartCoderCarriesEveryField
// fails when a field is added to schemas.Sample and not here.
func appendSample(b []byte, s *schemas.Sample) []byte {
	b = binary.AppendVarint(b, int64(s.SchemaVersion))
	b = appendString(b, s.ID)
	b = appendString(b, s.InstanceID)
	b = appendString(b, s.GroupID)
	b = binary.AppendVarint(b, int64(s.GroupSize))
	b = binary.AppendVarint(b, int64(s.Index))
	b = binary.AppendVarint(b, s.PolicyVersion)
	b = appendString(b, s.System)
	b = appendString(b, s.Prompt)
	b = appendInt32s(b, s.PromptTokens)
	b = appendString(b, s.Completion)
	b = appendInt32s(b, s.CompletionTokens)
	if s.LogProbs == nil {
		b = append(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(s.LogProbs))+1)
		for _, f := range s.LogProbs {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
	}
	b = appendString(b, s.FinishReason)
	b = binary.AppendVarint(b, s.LatencyMS)
	b = appendString(b, s.CreatedAt)
	b = appendFloat(b, s.Reward)
	b = appendString(b, s.FormatError)
	if s.Similarities == nil {
		b = append(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(s.Similarities))+1)
		for k, f := range s.Similarities {
			b = appendString(b, k)
			b = appendFloat(b, f)
		}
	}
	b = appendFloat(b, s.Advantage)
	b = appendFloat(b, s.GroupMean)
	b = appendFloat(b, s.GroupStd)
	if s.GroupComplete {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = appendString(b, s.Repo)
	return appendString(b, s.Source)
}

func appendInt32s(b []byte, xs []int32) []byte {
	if xs == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(xs))+1)
	for _, x := range xs {
		b = binary.AppendVarint(b, int64(x))
	}
	return b
}

var errShort = errors.New("truncated")

// decoder reads the part coder's layout; the first error sticks and every
// later read returns a zero value, so callers check once at the end.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail(errShort)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	x, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return x
}

func (d *decoder) varint() int64 {
	x, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return x
}

// count reads a length whose items take at least minBytes each, refusing
// one the remaining input cannot hold (no huge allocation from a bad
// length).
func (d *decoder) count(minBytes int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/minBytes) {
		d.fail(fmt.Errorf("length %d exceeds the %d bytes left", n, len(d.b)))
		return 0
	}
	return int(n)
}

// optCount reads a count stored plus one (0 is nil) and says whether the
// value is present.
func (d *decoder) optCount(minBytes int) (int, bool) {
	n := d.uvarint()
	if n == 0 {
		return 0, false
	}
	if n-1 > uint64(len(d.b)/minBytes) {
		d.fail(fmt.Errorf("length %d exceeds the %d bytes left", n-1, len(d.b)))
		return 0, false
	}
	return int(n - 1), d.err == nil
}

func (d *decoder) string() string {
	n := d.count(1)
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) float() float64 {
	if len(d.b) < 8 {
		d.fail(errShort)
		return 0
	}
	f := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return f
}

func (d *decoder) stringMap() map[string]string {
	n, ok := d.optCount(2)
	if !ok {
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		k := d.string()
		m[k] = d.string()
	}
	return m
}

func (d *decoder) int32s() []int32 {
	n, ok := d.optCount(1)
	if !ok {
		return nil
	}
	xs := make([]int32, n)
	for i := range xs {
		x := d.varint()
		if x < math.MinInt32 || x > math.MaxInt32 {
			d.fail(fmt.Errorf("token %d outside int32", x))
		}
		xs[i] = int32(x)
	}
	return xs
}

func (d *decoder) int() int {
	x := d.varint()
	if x < math.MinInt || x > math.MaxInt {
		d.fail(fmt.Errorf("integer %d out of range", x))
	}
	return int(x)
}

func (d *decoder) sample(s *schemas.Sample) {
	s.SchemaVersion = d.int()
	s.ID = d.string()
	s.InstanceID = d.string()
	s.GroupID = d.string()
	s.GroupSize = d.int()
	s.Index = d.int()
	s.PolicyVersion = d.varint()
	s.System = d.string()
	s.Prompt = d.string()
	s.PromptTokens = d.int32s()
	s.Completion = d.string()
	s.CompletionTokens = d.int32s()
	if n, ok := d.optCount(4); ok {
		s.LogProbs = make([]float32, n)
		for i := range s.LogProbs {
			s.LogProbs[i] = math.Float32frombits(binary.LittleEndian.Uint32(d.b))
			d.b = d.b[4:]
		}
	}
	s.FinishReason = d.string()
	s.LatencyMS = d.varint()
	s.CreatedAt = d.string()
	s.Reward = d.float()
	s.FormatError = d.string()
	if n, ok := d.optCount(9); ok {
		s.Similarities = make(map[string]float64, n)
		for range n {
			k := d.string()
			s.Similarities[k] = d.float()
		}
	}
	s.Advantage = d.float()
	s.GroupMean = d.float()
	s.GroupStd = d.float()
	switch d.byte() {
	case 0:
	case 1:
		s.GroupComplete = true
	default:
		d.fail(errors.New("group_complete is not 0 or 1"))
	}
	s.Repo = d.string()
	s.Source = d.string()
}
