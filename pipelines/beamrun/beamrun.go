// Package beamrun runs swerl's Beam pipelines: on the runner a --runner
// flag names, or Prism in-process by default. It also removes what the Go
// SDK leaves behind: for every job in loopback mode (Prism's default)
// runnerlib.Execute creates an empty placeholder worker binary,
// $TMPDIR/beamloopbackworker-*, and never deletes it (apache/beam#27569),
// so each `swerl run` left one file a step in /tmp.
//
// Beam's in-process Prism job service listens on every interface and runs
// any job sent to it; Run starts it itself, confined to the loopback
// interface, unless SetAllInterfaces (swerl: SWERL_PRISM_ALL_INTERFACES=1,
// see AllInterfacesEnv) or --endpoint names another job service.
package beamrun

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
)

// Placeholder is the glob, in os.TempDir(), of the SDK's loopback files.
const Placeholder = "beamloopbackworker-*"

// Run runs p on runner ("" for the default, Prism unless beam's --runner
// flag says otherwise) and returns its result with metrics. The embedded
// Prism job service is started on first use, on loopback only. When the
// last job of the process ends it removes the placeholders its own jobs
// created, and any left behind for over staleAfter.
func Run(ctx context.Context, runner string, p *beam.Pipeline) (beam.PipelineResult, error) {
	if err := preparePrism(runner); err != nil {
		return nil, err
	}
	enter()
	defer leave()
	stop := watchOwn()
	defer stop()
	if runner != "" {
		return beam.Run(ctx, runner, p)
	}
	return beamx.RunWithMetrics(ctx, p)
}

// staleAfter is the age past which a placeholder is removed whoever made
// it: its job staged it long ago (or died). Younger ones of other
// processes are left alone, since a job reads its placeholder only when it
// stages its artifacts, which under load comes seconds after the SDK made
// it: removing other processes' fresh placeholders failed their jobs
// ("failed to stage /tmp/beamloopbackworker-…: no such file").
const staleAfter = time.Hour

// Jobs of this process in flight, and the placeholders they created. The
// SDK makes each with os.CreateTemp and keeps it open, so the ones this
// process holds open (Linux's /proc/self/fd) are its own; watchOwn looks
// for them while the SDK prepares a job. Placeholders are removed only when
// the last job ends: removing them at the end of each job deleted the
// placeholder of a job started meanwhile in the same process before its
// staging read it.
var (
	inflightMu sync.Mutex
	inflight   int
	own        = map[string]bool{}
)

func enter() {
	inflightMu.Lock()
	defer inflightMu.Unlock()
	inflight++
}

func leave() {
	inflightMu.Lock()
	defer inflightMu.Unlock()
	if inflight--; inflight == 0 {
		removePlaceholders(own, time.Now())
		clear(own)
	}
}

// watchOwn records the placeholders this process holds open, looking
// often at first (the SDK makes one as it submits the job) and less often
// after, for at most ten seconds or until stop.
func watchOwn() (stop func()) {
	done := make(chan struct{})
	go func() {
		wait, deadline := time.Millisecond, time.After(10*time.Second)
		for {
			for _, n := range openPlaceholders() {
				inflightMu.Lock()
				own[n] = true
				inflightMu.Unlock()
			}
			select {
			case <-done:
				return
			case <-deadline:
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, 100*time.Millisecond)
		}
	}()
	return func() { close(done) }
}

// openPlaceholders lists the placeholders this process has open; none
// where /proc/self/fd cannot be read.
func openPlaceholders() []string {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	glob := filepath.Join(os.TempDir(), Placeholder)
	var names []string
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err != nil {
			continue
		}
		if ok, _ := filepath.Match(glob, target); ok {
			names = append(names, target)
		}
	}
	return names
}

// removePlaceholders deletes the empty placeholders in the temporary
// directory that are in mine or older than staleAfter at now.
func removePlaceholders(mine map[string]bool, now time.Time) {
	names, _ := filepath.Glob(filepath.Join(os.TempDir(), Placeholder))
	for _, n := range names {
		fi, err := os.Lstat(n)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
			continue
		}
		if mine[n] || now.Sub(fi.ModTime()) > staleAfter {
			os.Remove(n)
		}
	}
}
