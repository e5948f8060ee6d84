package advantage

import (
	"math"
	"testing"

	"swerl/schemas"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestEstimators(t *testing.T) {
	r := []float64{1, 0, 0.5, -1}
	// Expected values computed by hand: mean 0.125, population variance
	// (0.765625+0.015625+0.140625+1.265625)/4 = 0.546875.
	mean, std := Stats(r)
	if !near(mean, 0.125) || !near(std, math.Sqrt(0.546875)) {
		t.Fatalf("stats %v %v", mean, std)
	}
	g, _ := Compute(GRPO, r)
	d, _ := Compute(DrGRPO, r)
	l, _ := Compute(RLOO, r)
	for i, x := range r {
		if !near(g[i], (x-0.125)/(math.Sqrt(0.546875)+1e-6)) || !near(d[i], x-0.125) {
			t.Errorf("%d: grpo %v drgrpo %v", i, g[i], d[i])
		}
		// RLOO from its definition: r_i minus the mean of the others.
		others := 0.0
		for j, y := range r {
			if j != i {
				others += y
			}
		}
		if !near(l[i], x-others/3) {
			t.Errorf("%d: rloo %v want %v", i, l[i], x-others/3)
		}
	}
	sum := 0.0
	for _, x := range g {
		sum += x
	}
	if !near(sum, 0) {
		t.Errorf("GRPO advantages must sum to 0, got %v", sum)
	}
	for _, m := range []Method{GRPO, DrGRPO, RLOO} {
		for _, rr := range [][]float64{{-1, -1, -1}, {0.3}} {
			a, err := Compute(m, rr)
			if err != nil || !ZeroVariance(rr) {
				t.Fatal(err)
			}
			for _, x := range a {
				if x != 0 || math.IsNaN(x) {
					t.Errorf("%s %v: %v", m, rr, a)
				}
			}
		}
	}
	if _, err := ParseMethod("ppo"); err == nil {
		t.Error("unknown method accepted")
	}
}

func TestGroup(t *testing.T) {
	s := []schemas.Sample{{Reward: 1}, {Reward: 0}}
	zero, err := Group(GRPO, s, false)
	if err != nil || zero || !near(s[0].Advantage, 0.5/(0.5+1e-6)) || !near(s[1].GroupMean, 0.5) || !near(s[1].GroupStd, 0.5) || s[0].GroupComplete {
		t.Fatalf("%+v %v %v", s, zero, err)
	}
	s = []schemas.Sample{{Reward: -1}, {Reward: -1}}
	if zero, _ := Group(RLOO, s, true); !zero || !s[1].GroupComplete {
		t.Fatal("zero-variance group not reported")
	}
}
