package schemas

import "testing"

func TestSWEBenchID(t *testing.T) {
	for in, want := range map[string]string{
		"psf/requests#863":               "psf__requests-863",
		"pytest-dev/pytest#5787":         "pytest-dev__pytest-5787",
		"psf__requests-863":              "psf__requests-863", // imported rows keep theirs
		"acme/widgets@0123456789ab":      "acme/widgets@0123456789ab",
		"acme/widgets#12/calc/calc.go:3": "acme/widgets#12/calc/calc.go:3", // a hunk task
		"acme/widgets#x":                 "acme/widgets#x",
		"widgets#3":                      "widgets#3",
		"":                               "",
	} {
		if got := SWEBenchID(in); got != want {
			t.Errorf("SWEBenchID(%q) = %q, want %q", in, got, want)
		}
	}
}
