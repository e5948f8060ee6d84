package beamrun_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"swerl/pipelines/beamrun"
)

func TestMain(m *testing.M) { ptest.MainWithDefault(m, "prism") }

// A job on Prism (loopback) leaves no placeholder of its own in the
// temporary directory. Another process's placeholders stay, one made while
// the job ran included (its job may not have staged it yet), unless they
// are over staleAfter old.
func TestRunRemovesLoopbackPlaceholder(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	older := filepath.Join(tmp, "beamloopbackworker-older")
	stale := filepath.Join(tmp, "beamloopbackworker-stale")
	for _, f := range []string{older, stale} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, long, long); err != nil {
		t.Fatal(err)
	}
	want := []string{older}
	for i := range 2 {
		// A placeholder of another process (touch), made while this job
		// runs. Made by this process it would be open here for a moment
		// and could pass for one of the job's own.
		foreign := filepath.Join(tmp, fmt.Sprintf("beamloopbackworker-foreign%d", i))
		made := make(chan error, 1)
		go func() {
			// Paces the touch into the job's run on purpose; a touch that
			// lands after it still must survive, it only checks less.
			time.Sleep(20 * time.Millisecond)
			made <- exec.Command("touch", foreign).Run()
		}()
		p, s := beam.NewPipelineWithRoot()
		passert.Equals(s, beam.Create(s, 1, 2, 3), 1, 2, 3)
		if _, err := beamrun.Run(context.Background(), "", p); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		if err := <-made; err != nil {
			t.Fatal(err)
		}
		want = append(want, foreign)
		left, _ := filepath.Glob(filepath.Join(tmp, beamrun.Placeholder))
		slices.Sort(left)
		slices.Sort(want)
		if !slices.Equal(left, want) {
			t.Fatalf("after job %d the temporary directory holds %v, want %v", i, left, want)
		}
	}
}

// The embedded Prism job service is confined to the loopback interface:
// its wildcard listener is bound to the loopback device, so the kernel
// refuses connections arriving on any other interface, and jobs still run
// through it (the job above and this one).
func TestPrismListensOnLoopbackOnly(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("confining Prism to loopback needs Linux's SO_BINDTODEVICE")
	}
	p, s := beam.NewPipelineWithRoot()
	passert.Equals(s, beam.Create(s, "a"), "a")
	if _, err := beamrun.Run(context.Background(), "", p); err != nil {
		t.Fatal(err)
	}
	_, portStr, err := net.SplitHostPort(*jobopts.Endpoint)
	if err != nil {
		t.Fatalf("endpoint %q: %v", *jobopts.Endpoint, err)
	}
	port, _ := strconv.Atoi(portStr)
	devs, err := beamrun.BoundDevices(port)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) == 0 {
		t.Fatalf("no wildcard listener on port %d", port)
	}
	for _, d := range devs {
		if d != "lo" {
			t.Errorf("Prism's listener on port %d is bound to %q, want lo", port, d)
		}
	}
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", portStr))
	if err != nil {
		t.Fatalf("loopback connection to Prism: %v", err)
	}
	c.Close()
}
