package agentless

import "testing"

// BenchmarkNormalizeFlask normalizes the gold patch of a flask instance
// (src/flask/cli.py, 1054 lines, on both sides), the work done per repair candidate.
func BenchmarkNormalizeFlask(b *testing.B) {
	var v *vector
	for _, x := range loadVectors(b, "normalize") {
		if x.ID == "pallets__flask-5063/normalize/gold" {
			v = x
		}
	}
	if v == nil {
		b.Fatal("vector pallets__flask-5063/normalize/gold not found")
	}
	for b.Loop() {
		if _, err := NormalizePatch(*v.Patch, v.Files, v.NewFiles, v.EditedFiles); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyFlask applies the gold answer of a flask instance.
func BenchmarkApplyFlask(b *testing.B) {
	var v *vector
	for _, x := range loadVectors(b, "apply") {
		if x.ID == "pallets__flask-5063/apply/gold" {
			v = x
		}
	}
	if v == nil {
		b.Fatal("vector pallets__flask-5063/apply/gold not found")
	}
	for b.Loop() {
		Apply(v.Files, *v.Edits)
	}
}
