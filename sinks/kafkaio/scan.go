package kafkaio

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
)

// Scan reads rc.Topic without Beam, as a bounded read: every partition
// (one after another, in offset order) from its start to the end offset
// it has when Scan begins (or rc.ToOffset/ToTime), calling fn for each
// record. It stops at the first error fn returns. PositionsDir applies as
// in Read (Scan itself acknowledges nothing).
func Scan(ctx context.Context, rc ReadConfig, fn func(Message) error) error {
	rc.Bounded = true
	specs, err := resolve(ctx, rc)
	if err != nil {
		return err
	}
	r := &readFn{RC: rc}
	defer r.Teardown()
	for _, s := range specs {
		rt := sdf.NewLockRTracker(offsetrange.NewTracker(offsetrange.Restriction{Start: s.Start, End: s.End}))
		skip := skipSet(s)
		next := s.Start
		var ferr error
		for next < s.End && ferr == nil {
			var n int
			var hw int64
			var done bool
			next, n, hw, done, err = r.step(ctx, rt, s, skip, next, func(_ beam.EventTime, m Message) {
				if ferr == nil {
					ferr = fn(m)
				}
			})
			if err != nil {
				return err
			}
			if done || (n == 0 && hw >= s.End) {
				break
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if ferr != nil {
			return ferr
		}
	}
	return nil
}
