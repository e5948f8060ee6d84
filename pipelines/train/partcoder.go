package train

import (
	"fmt"

	"swerl/internal/bincode"
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
// and maps, then the members, each a Lost string and a sample in the form
// generated from schemas.Sample (Sample.AppendBincode). Maps are in
// map order: parts are values, never keys, so the encoding need not be
// deterministic.
const partCoderVersion = 1

func encodePart(v part) ([]byte, error) {
	n := 64 + len(v.GroupID) + len(v.Origin) + len(v.System) + len(v.Prompt) + bincode.MapLen(v.Files) + bincode.MapLen(v.Oracle)
	for i := range v.Members {
		n += 5 + len(v.Members[i].Lost) + v.Members[i].Sample.BincodeSize()
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
		b = v.Members[i].Sample.AppendBincode(b) // generated from schemas.Sample
	}
	return b, nil
}

func decodePart(b []byte) (part, error) {
	var v part
	d := bincode.NewDecoder(b)
	d.Version(partCoderVersion)
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
			v.Members[i].Sample.ReadBincode(d)
		}
	}
	if err := d.End(); err != nil {
		return part{}, fmt.Errorf("train: decoding a part: %w", err)
	}
	return v, nil
}
