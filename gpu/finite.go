package gpu

import (
	"fmt"
	"math"
)

// A weight that is NaN or infinite makes every logit NaN: the model then
// samples nothing useful and its log-probabilities cannot be encoded. The
// checks here let whatever installs, writes or publishes weights refuse
// them first, naming the tensor at fault.

// NonFiniteError reports a tensor holding NaN or infinite values.
type NonFiniteError struct {
	Tensor string  // its Hugging Face (or PEFT) name
	Count  int     // how many of its values are NaN or infinite
	Index  int     // the first one
	Value  float32 // its value
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("tensor %q has %d NaN or infinite values (the first, %v, at index %d)", e.Tensor, e.Count, e.Value, e.Index)
}

// nonFinite counts the NaN and infinite values of x and returns the index
// of the first (-1 when there is none).
func nonFinite(x []float32) (count, first int) {
	first = -1
	for i, v := range x {
		// v-v is 0 for every finite v, NaN for NaN and ±Inf.
		if v-v != 0 {
			if first < 0 {
				first = i
			}
			count++
		}
	}
	return count, first
}

// CheckFinite returns a *NonFiniteError for the first tensor of ts that
// holds a NaN or infinite value, nil when every value is finite.
func CheckFinite(ts []Tensor) error {
	for _, t := range ts {
		if n, i := nonFinite(t.Data); n > 0 {
			return &NonFiniteError{Tensor: t.Name, Count: n, Index: i, Value: t.Data[i]}
		}
	}
	return nil
}

// CheckFinite reports the first parameter tensor of m holding a NaN or
// infinite value (see the function CheckFinite).
func (m *Model) CheckFinite() error { return CheckFinite(m.Tensors()) }

// Largest returns the tensor of m holding the value of largest magnitude,
// and that magnitude: finite weights can still overflow float32 in the
// forward pass (weights of 3e38 do), and the largest is the first suspect
// to name.
func (m *Model) Largest() (tensor string, magnitude float32) {
	for _, t := range m.Tensors() {
		for _, v := range t.Data {
			if a := float32(math.Abs(float64(v))); a > magnitude || (tensor == "" && a == magnitude) {
				tensor, magnitude = t.Name, a
			}
		}
	}
	return tensor, magnitude
}
