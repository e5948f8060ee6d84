package train

import (
	"fmt"

	"swerl/internal/bincode"
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
// Layout (primitives of package bincode): version, then the part's strings
// and maps, then the members, each a Lost string and a sample. Maps are in
// map order: parts are values, never keys, so the encoding need not be
// deterministic.
const partCoderVersion = 1

func encodePart(v part) ([]byte, error) {
	n := 64 + len(v.GroupID) + len(v.Origin) + len(v.System) + len(v.Prompt) + bincode.MapLen(v.Files) + bincode.MapLen(v.Oracle)
	for i := range v.Members {
		s := &v.Members[i].Sample
		n += 160 + len(s.ID) + len(s.InstanceID) + len(s.GroupID) + len(s.System) + len(s.Prompt) + len(s.Completion) +
			5*len(s.PromptTokens) + 5*len(s.CompletionTokens) + 4*len(s.LogProbs) + len(v.Members[i].Lost)
	}
	b := make([]byte, 0, n)
	b = append(b, partCoderVersion)
	b = bincode.AppendString(b, v.GroupID)
	b = bincode.AppendString(b, v.Origin)
	b = bincode.AppendString(b, v.System)
	b = bincode.AppendString(b, v.Prompt)
	b = bincode.AppendStringMap(b, v.Files)
	b = bincode.AppendStringMap(b, v.Oracle)
	b = bincode.AppendCount(b, len(v.Members))
	for i := range v.Members {
		b = bincode.AppendString(b, v.Members[i].Lost)
		b = appendSample(b, &v.Members[i].Sample)
	}
	return b, nil
}

func decodePart(b []byte) (part, error) {
	var v part
	d := bincode.NewDecoder(b)
	if ver := d.Byte(); d.Err() == nil && ver != partCoderVersion {
		return v, fmt.Errorf("train: part coder version %d, want %d", ver, partCoderVersion)
	}
	v.GroupID = d.String()
	v.Origin = d.String()
	v.System = d.String()
	v.Prompt = d.String()
	v.Files = d.StringMap()
	v.Oracle = d.StringMap()
	if n := d.Count(2); n > 0 {
		v.Members = make([]member, n)
		for i := range v.Members {
			v.Members[i].Lost = d.String()
			readSample(d, &v.Members[i].Sample)
		}
	}
	if err := d.End(); err != nil {
		return part{}, fmt.Errorf("train: decoding a part: %w", err)
	}
	return v, nil
}

// appendSample writes every field of s; TestPartCoderCarriesEveryField
// fails when a field is added to schemas.Sample and not here.
func appendSample(b []byte, s *schemas.Sample) []byte {
	b = bincode.AppendInt(b, int64(s.SchemaVersion))
	b = bincode.AppendString(b, s.ID)
	b = bincode.AppendString(b, s.InstanceID)
	b = bincode.AppendString(b, s.GroupID)
	b = bincode.AppendInt(b, int64(s.GroupSize))
	b = bincode.AppendInt(b, int64(s.Index))
	b = bincode.AppendInt(b, s.PolicyVersion)
	b = bincode.AppendString(b, s.System)
	b = bincode.AppendString(b, s.Prompt)
	b = bincode.AppendInt32s(b, s.PromptTokens)
	b = bincode.AppendString(b, s.Completion)
	b = bincode.AppendInt32s(b, s.CompletionTokens)
	b = bincode.AppendFloat32s(b, s.LogProbs)
	b = bincode.AppendString(b, s.FinishReason)
	b = bincode.AppendInt(b, s.LatencyMS)
	b = bincode.AppendString(b, s.CreatedAt)
	b = bincode.AppendFloat(b, s.Reward)
	b = bincode.AppendString(b, s.FormatError)
	if s.Similarities == nil {
		b = bincode.AppendOptCount(b, -1)
	} else {
		b = bincode.AppendOptCount(b, len(s.Similarities))
		for k, f := range s.Similarities {
			b = bincode.AppendString(b, k)
			b = bincode.AppendFloat(b, f)
		}
	}
	b = bincode.AppendFloat(b, s.Advantage)
	b = bincode.AppendFloat(b, s.GroupMean)
	b = bincode.AppendFloat(b, s.GroupStd)
	b = bincode.AppendBool(b, s.GroupComplete)
	b = bincode.AppendString(b, s.Repo)
	return bincode.AppendString(b, s.Source)
}

func readSample(d *bincode.Decoder, s *schemas.Sample) {
	s.SchemaVersion = d.Int()
	s.ID = d.String()
	s.InstanceID = d.String()
	s.GroupID = d.String()
	s.GroupSize = d.Int()
	s.Index = d.Int()
	s.PolicyVersion = d.Int64()
	s.System = d.String()
	s.Prompt = d.String()
	s.PromptTokens = d.Int32s()
	s.Completion = d.String()
	s.CompletionTokens = d.Int32s()
	s.LogProbs = d.Float32s()
	s.FinishReason = d.String()
	s.LatencyMS = d.Int64()
	s.CreatedAt = d.String()
	s.Reward = d.Float()
	s.FormatError = d.String()
	if n, ok := d.OptCount(9); ok {
		s.Similarities = make(map[string]float64, n)
		for range n {
			k := d.String()
			s.Similarities[k] = d.Float()
		}
	}
	s.Advantage = d.Float()
	s.GroupMean = d.Float()
	s.GroupStd = d.Float()
	s.GroupComplete = d.Bool()
	s.Repo = d.String()
	s.Source = d.String()
}
