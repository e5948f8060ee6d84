// Package advantage turns the rewards of a group (the G scored completions of
// one prompt) into group-relative advantages.
//
//   - GRPO (the paper's, SWE-RL.md §2.3): A_i = (r_i − mean) / (std + 1e-6).
//     std is the population standard deviation (divide by G, numpy's default):
//     it is defined for every G ≥ 1 and does not depend on a Bessel choice
//     the paper leaves open; the 1e-6 makes a zero-variance group's
//     advantages exactly 0.
//   - Dr.GRPO: A_i = r_i − mean (no std division, which removes the
//     difficulty bias of normalizing by std).
//   - RLOO: A_i = r_i − mean of the other G−1 rewards = G/(G−1)·(r_i − mean);
//     0 for a group of one.
//
// A group whose rewards are all equal carries no learning signal under any
// of the three; callers count such groups and may drop them (DAPO's dynamic
// sampling).
package advantage

import (
	"fmt"
	"math"

	"swerl/schemas"
)

// Method names an advantage estimator.
type Method string

// Estimators.
const (
	GRPO   Method = "grpo"
	DrGRPO Method = "drgrpo"
	RLOO   Method = "rloo"
)

// DefaultGroupSize is G, the completions sampled for one prompt, where a
// caller leaves it unset: swerl's --group-size and the train and RL
// pipelines' GroupSize.
const DefaultGroupSize = 4

// Eps is added to the GRPO std.
const Eps = 1e-6

// ParseMethod accepts "grpo", "drgrpo" (or "dr-grpo", "dr.grpo") and "rloo".
func ParseMethod(s string) (Method, error) {
	switch s {
	case "grpo", "":
		return GRPO, nil
	case "drgrpo", "dr-grpo", "dr.grpo":
		return DrGRPO, nil
	case "rloo":
		return RLOO, nil
	}
	return "", fmt.Errorf("advantage: unknown method %q (want grpo, drgrpo or rloo)", s)
}

// Stats returns the mean and population standard deviation of r.
func Stats(r []float64) (mean, std float64) {
	if len(r) == 0 {
		return 0, 0
	}
	for _, x := range r {
		mean += x
	}
	mean /= float64(len(r))
	for _, x := range r {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(r)))
}

// ZeroVariance reports whether all rewards are equal (no signal).
func ZeroVariance(r []float64) bool {
	for _, x := range r {
		if x != r[0] {
			return false
		}
	}
	return true
}

// Compute returns the advantages of rewards r under m.
func Compute(m Method, r []float64) ([]float64, error) {
	mean, std := Stats(r)
	a := make([]float64, len(r))
	zero := ZeroVariance(r)
	for i, x := range r {
		switch {
		case zero:
			a[i] = 0
		case m == GRPO:
			a[i] = (x - mean) / (std + Eps)
		case m == DrGRPO:
			a[i] = x - mean
		case m == RLOO:
			g := float64(len(r))
			a[i] = g / (g - 1) * (x - mean)
		default:
			return nil, fmt.Errorf("advantage: unknown method %q", m)
		}
	}
	return a, nil
}

// Group fills Advantage, GroupMean, GroupStd and GroupComplete of the samples
// of one group (all with the same group_id), in place. complete says whether
// all group_size members are present. It returns whether the group has zero
// variance.
func Group(m Method, s []schemas.Sample, complete bool) (zeroVariance bool, err error) {
	r := make([]float64, len(s))
	for i := range s {
		r[i] = s[i].Reward
	}
	a, err := Compute(m, r)
	if err != nil {
		return false, err
	}
	mean, std := Stats(r)
	for i := range s {
		s[i].Advantage, s[i].GroupMean, s[i].GroupStd, s[i].GroupComplete = a[i], mean, std, complete
	}
	return len(s) > 0 && ZeroVariance(r), nil
}
