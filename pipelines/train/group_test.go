package train

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"

	"swerl/pipelines/beamrun"
	"swerl/schemas"
	"swerl/sinks/metrics"
	"swerl/sinks/parquetio"
)

func init() {
	beam.RegisterFunction(partKey)
}

func partKey(p part) (string, part) { return p.GroupID, p }

// TestGroupMergesParts sends groups split into parts through the group
// stage: parts of a group are merged in state; a group whose parts are all
// there is complete; one that misses a part is finished incomplete by its
// timer when the input ends (and emitted with advantages over the members
// present).
func TestGroupMergesParts(t *testing.T) {
	if !beam.Initialized() {
		beam.Init()
	}
	const g = 4
	mk := func(gid string, idx ...int) part {
		p := part{GroupID: gid, Origin: "file:" + gid, Prompt: "prompt of " + gid}
		for _, i := range idx {
			s := schemas.Sample{Rollout: schemas.Rollout{ID: fmt.Sprintf("%s/%d", gid, i), GroupID: gid, GroupSize: g, Index: i, InstanceID: gid}}
			s.Reward = float64(i)
			p.Members = append(p.Members, member{Sample: s})
		}
		return p
	}
	parts := []part{mk("a", 0, 1), mk("b", 0), mk("a", 2, 3), mk("b", 2, 3)} // b misses index 1
	id := newRunID()
	defer dropRun(id)
	dir := t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	keyed := beam.ParDo(s, partKey, beam.CreateList(s, parts))
	samples, _ := beam.ParDo2(s, &groupFn{RunID: id, GroupSize: g, Method: "grpo", TimeoutMS: 3600_000,
		Members: state.MakeBagState[[]byte]("members"), Arrived: state.MakeValueState[int64]("arrived"),
		Timeout: timers.InEventTime("timeout")}, keyed)
	beam.ParDo(s, &sampleSinkFn{RunID: id, Dir: dir, RowsPerFile: 100}, samples)
	res, err := beamrun.Run(context.Background(), "", p)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parquetio.ReadDir[schemas.Sample](dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]schemas.Sample{}
	for _, r := range rows {
		got[r.ID] = r
	}
	if len(rows) != 7 || len(got) != 7 {
		t.Fatalf("%d rows (%d ids), want 4 of a and 3 of b: %v", len(rows), len(got), got)
	}
	for id, r := range got {
		complete := r.GroupID == "a"
		if r.GroupComplete != complete || r.Prompt != "prompt of "+r.GroupID {
			t.Errorf("%s: complete %v prompt %q", id, r.GroupComplete, r.Prompt)
		}
	}
	// b = rewards {0, 2, 3}: mean 5/3.
	if m := got["b/0"].GroupMean; m < 1.666 || m > 1.667 {
		t.Errorf("b's mean %v, want 5/3", m)
	}
	if sum, ok := summarize(res, metrics.Baseline{}); !ok || sum.Groups != 2 || sum.Incomplete != 1 {
		t.Fatalf("groups %d incomplete %d (from the runner: %v)", sum.Groups, sum.Incomplete, ok)
	}
}
