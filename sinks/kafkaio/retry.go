package kafkaio

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/segmentio/kafka-go"
)

// RetryConfig is how long reads and writes wait out a broker that cannot
// be reached or has no leader for a partition (a restart, a rolling
// upgrade) before they fail. Between tries they wait 100ms, doubling up
// to Ceiling, and log every failed try.
type RetryConfig struct {
	// Budget is the longest a read or write keeps retrying after its first
	// failure; default 5 minutes.
	Budget time.Duration `json:"budget"`
	// Ceiling caps the wait between two tries; default 10 seconds.
	Ceiling time.Duration `json:"ceiling"`
}

const firstBackoff = 100 * time.Millisecond

func (r RetryConfig) withDefaults() RetryConfig {
	if r.Budget <= 0 {
		r.Budget = 5 * time.Minute
	}
	if r.Ceiling <= 0 {
		r.Ceiling = 10 * time.Second
	}
	r.Ceiling = max(r.Ceiling, firstBackoff)
	return r
}

// Do calls f until it succeeds, fails with an error that waiting cannot
// fix (see retriable), ctx ends, or Budget has passed since the first
// failure. what names the operation in the log and the error. Reads and
// writes of this package use it; so does the learner's consumer-group
// read, which kafka-go gives up after three failed joins.
func (r RetryConfig) Do(ctx context.Context, what string, f func() error) error {
	r = r.withDefaults()
	var first time.Time
	wait := firstBackoff
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil {
			if attempt > 1 {
				log.Infof(ctx, "kafkaio: %s: succeeded on try %d after %s", what, attempt, time.Since(first).Round(time.Millisecond))
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (stopped: %w)", err, ctx.Err())
		}
		if !retriable(err) {
			return err
		}
		if attempt == 1 {
			first = time.Now()
		}
		left := r.Budget - time.Since(first)
		if left <= 0 {
			return fmt.Errorf("kafkaio: %s: gave up after %d tries in %s: %w", what, attempt, time.Since(first).Round(time.Millisecond), err)
		}
		wait = min(wait, left)
		log.Warnf(ctx, "kafkaio: %s failed (try %d), retrying in %s (for up to %s more): %v", what, attempt, wait, left.Round(time.Second), err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (stopped: %w)", err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, r.Ceiling)
	}
}

// retriable reports whether err may go away by waiting: a network failure
// (connection refused or reset, EOF, a timeout) or a Kafka error the
// protocol marks temporary (no leader, not the leader, request timed out,
// …). Authentication and certificate failures, records too large and
// swerl's own errors are not.
func retriable(err error) bool {
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		for _, e := range we {
			if e != nil && !retriable(e) {
				return false
			}
		}
		return we.Count() > 0
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		return ke.Temporary()
	}
	var (
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		certErr   *tls.CertificateVerificationError
		tooLarge  kafka.MessageTooLargeError
	)
	if errors.As(err, &unknownCA) || errors.As(err, &hostErr) || errors.As(err, &certErr) || errors.As(err, &tooLarge) {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}
