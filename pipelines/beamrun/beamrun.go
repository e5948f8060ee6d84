// Package beamrun runs swerl's Beam pipelines: on the runner a --runner
// flag names, or Prism in-process by default. It also removes what the Go
// SDK leaves behind: for every job in loopback mode (Prism's default)
// runnerlib.Execute creates an empty placeholder worker binary,
// $TMPDIR/beamloopbackworker-*, and never deletes it (apache/beam#27569),
// so each `swerl run` left one file a step in /tmp.
//
// Beam's in-process Prism job service listens on every interface and runs
// any job sent to it; Run starts it itself, confined to the loopback
// interface, unless SWERL_PRISM_ALL_INTERFACES=1 (see AllInterfacesEnv) or
// --endpoint names another job service.
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
// Prism job service is started on first use, on loopback only. Afterwards it
// removes the empty placeholders that appeared in the temporary directory
// while the job ran.
func Run(ctx context.Context, runner string, p *beam.Pipeline) (beam.PipelineResult, error) {
	if err := preparePrism(runner); err != nil {
		return nil, err
	}
	enter()
	defer leave()
	if runner != "" {
		return beam.Run(ctx, runner, p)
	}
	return beamx.RunWithMetrics(ctx, p)
}

// Jobs of this process in flight, and the placeholders present when the
// first of them started. Placeholders are removed only when the last job
// ends: removing them at the end of each job deleted the placeholder of a
// job started meanwhile in the same process before its staging read it
// ("failed to stage /tmp/beamloopbackworker-…: no such file"), which
// failed a test that runs pipelines back to back and in parallel.
var (
	inflightMu sync.Mutex
	inflight   int
	baseline   map[string]bool
	firstStart time.Time
)

func enter() {
	inflightMu.Lock()
	defer inflightMu.Unlock()
	if inflight == 0 {
		baseline, firstStart = placeholders(), time.Now()
	}
	inflight++
}

func leave() {
	inflightMu.Lock()
	defer inflightMu.Unlock()
	if inflight--; inflight == 0 {
		removeNew(baseline, firstStart)
	}
}

func placeholders() map[string]bool {
	names, _ := filepath.Glob(filepath.Join(os.TempDir(), Placeholder))
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}

// removeNew deletes the placeholders that were not there before the job,
// are empty, and were created after it started. Another process's
// placeholder is read by its job's staging within milliseconds of being
// created, so only one made in the instant before the removal could be
// taken from it, and that job would fail with an error, not lose data.
func removeNew(before map[string]bool, start time.Time) {
	for n := range placeholders() {
		if before[n] {
			continue
		}
		fi, err := os.Lstat(n)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 || fi.ModTime().Before(start.Add(-time.Second)) {
			continue
		}
		os.Remove(n)
	}
}
