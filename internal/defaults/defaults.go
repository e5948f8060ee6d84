// Package defaults fills a config's unset fields. swerl's configs take a
// zero (or negative) count, size or duration as "use the default", so a
// zero-value config works; Positive says that once instead of an if
// statement per field.
package defaults

// Number is what Positive fills: counts, sizes, durations, rates.
type Number interface {
	~int | ~int32 | ~int64 | ~uint | ~uint32 | ~uint64 | ~float32 | ~float64
}

// Positive returns v when it is above zero, else d.
func Positive[T Number](v, d T) T {
	if v > 0 {
		return v
	}
	return d
}
