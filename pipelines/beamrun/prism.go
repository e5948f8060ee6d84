package beamrun

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
)

// AllInterfacesEnv names the environment variable that, set to 1, leaves
// the embedded Prism job service listening on every interface, as Beam
// starts it. cmd/swerl reads it and calls SetAllInterfaces; otherwise Run
// restricts the service to the loopback interface.
const AllInterfacesEnv = "SWERL_PRISM_ALL_INTERFACES"

// allInterfaces is SetAllInterfaces's setting.
var allInterfaces atomic.Bool

// SetAllInterfaces, with on true, makes Run leave the embedded Prism job
// service on every interface, as Beam starts it, instead of confining it
// to loopback. It is a process setting, as Beam's runner flags are.
func SetAllInterfaces(on bool) { allInterfaces.Store(on) }

var (
	prismOnce     sync.Once
	prismEndpoint string
	prismErr      error
)

// usesEmbeddedPrism reports whether a job for runner would start Beam's
// in-process Prism: the runner is Prism (by argument, by --runner, or by
// default) and no --endpoint names a job service.
func usesEmbeddedPrism(runner string) bool {
	if runner == "" {
		runner = *runners.Runner
	}
	switch strings.ToLower(runner) {
	case "", "prism", "prismrunner":
		return *jobopts.Endpoint == ""
	}
	return false
}

// startLoopbackPrism starts the in-process Prism job service once, before
// Beam would, and restricts its listener to the loopback interface. Beam's
// Prism listens on ":port", every interface, and takes no address, so the
// service, which accepts and runs any job it is sent, was reachable from
// the network for as long as swerl ran. The listener is then confined with
// SO_BINDTODEVICE: connections arriving on any other interface are refused
// by the kernel. It sets --endpoint (and --environment_type=loopback,
// Prism's own default, unless one is given), so that Beam's Prism runner
// uses this service instead of starting its own.
func startLoopbackPrism() (string, error) {
	prismOnce.Do(func() {
		prismEndpoint, prismErr = loopbackPrism()
		if prismErr != nil {
			return
		}
		*jobopts.Endpoint = prismEndpoint
		if *jobopts.EnvironmentType == "" {
			*jobopts.EnvironmentType = "loopback"
		}
	})
	return prismEndpoint, prismErr
}

func loopbackPrism() (string, error) {
	var lastErr error
	// Prism takes a port, not a listener: a free port is picked and may be
	// taken by another process before Prism binds it, so try a few.
	for range 3 {
		port, err := freePort()
		if err != nil {
			return "", err
		}
		if err := startPrism(port); err != nil {
			lastErr = err
			continue
		}
		if err := confineToLoopback(port); err != nil {
			return "", fmt.Errorf("beamrun: Prism job service on port %d listens on every interface and could not be confined to loopback (set %s=1 to accept that): %w", port, AllInterfacesEnv, err)
		}
		return fmt.Sprintf("localhost:%d", port), nil
	}
	return "", fmt.Errorf("beamrun: start Prism: %w", lastErr)
}

// startPrism starts the job service; Prism panics when it cannot listen.
func startPrism(port int) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	_, err = prism.CreateJobServer(context.Background(), prism.Options{Port: port})
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("beamrun: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// preparePrism is called by Run before a job: it starts the loopback-only
// Prism when the job would use the embedded one, unless SetAllInterfaces
// asked for Beam's default.
func preparePrism(runner string) error {
	if !usesEmbeddedPrism(runner) || allInterfaces.Load() {
		return nil
	}
	ep, err := startLoopbackPrism()
	if err == nil {
		slog.Debug("beamrun: Prism job service on the loopback interface only", "endpoint", ep)
	}
	return err
}
