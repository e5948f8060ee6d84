package beamrun_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"swerl/pipelines/beamrun"
)

func TestMain(m *testing.M) { ptest.MainWithDefault(m, "prism") }

// A job on Prism (loopback) leaves no placeholder in the temporary
// directory, and one that was there before the job stays.
func TestRunRemovesLoopbackPlaceholder(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	older := filepath.Join(tmp, "beamloopbackworker-older")
	if err := os.WriteFile(older, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		p, s := beam.NewPipelineWithRoot()
		passert.Equals(s, beam.Create(s, 1, 2, 3), 1, 2, 3)
		if _, err := beamrun.Run(context.Background(), "", p); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		left, _ := filepath.Glob(filepath.Join(tmp, beamrun.Placeholder))
		if len(left) != 1 || left[0] != older {
			t.Fatalf("after job %d the temporary directory holds %v, want only %s", i, left, older)
		}
	}
}
