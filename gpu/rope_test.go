package gpu

import (
	"math"
	"testing"
)

// TestRopeTablesLlama3 checks llama3 frequency scaling at the three bands
// of the rule in Meta's reference (apply_scaling in llama3's model.py):
// wavelengths below original/high_freq_factor keep their frequency, those
// above original/low_freq_factor are divided by factor, and the band
// between interpolates smoothly.
func TestRopeTablesLlama3(t *testing.T) {
	c := Config{HiddenSize: 128, NumAttentionHeads: 2, RopeTheta: 500000,
		RopeScaling: &RopeScaling{RopeType: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}}
	const P, half = 3000, 32
	cos, sin := ropeTables(c, P)
	plain, _ := ropeTables(Config{HiddenSize: 128, NumAttentionHeads: 2, RopeTheta: 500000}, P)
	angle := func(p, i int) float64 { return math.Atan2(float64(sin[p*half+i]), float64(cos[p*half+i])) }
	// i = 0: frequency 1, wavelength 2π < 2048: unchanged.
	if a := angle(1, 0); math.Abs(a-1) > 1e-6 {
		t.Errorf("highest frequency angle at position 1 = %v, want 1", a)
	}
	// i = 31: frequency 500000^(-62/64), wavelength ~ 2.1e5 > 8192: / 32.
	f := math.Pow(500000, -62.0/64) / 32
	if a := angle(2999, 31); math.Abs(a-2999*f) > 1e-5 {
		t.Errorf("lowest frequency angle at position 2999 = %v, want %v", a, 2999*f)
	}
	if plain[2999*half+31] == cos[2999*half+31] {
		t.Error("scaling did not change the lowest frequency")
	}
	// A middle frequency (wavelength between 2048 and 8192) is between the
	// unscaled and fully scaled values.
	for i := range half {
		inv := math.Pow(500000, -float64(2*i)/64)
		w := 2 * math.Pi / inv
		if w <= 2048 || w >= 8192 {
			continue
		}
		got := angle(1, i)
		if !(got < inv && got > inv/32) {
			t.Errorf("band %d (wavelength %.0f): frequency %v not between %v and %v", i, w, got, inv/32, inv)
		}
	}
}
