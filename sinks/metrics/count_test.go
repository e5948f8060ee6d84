package metrics

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/prometheus/client_golang/prometheus"
)

func TestMain(m *testing.M) { ptest.MainWithDefault(m, "prism") }

const testNS = "swerl.metrics_test"

var (
	tItems = NewCounter(testNS, "items", prometheus.CounterOpts{Name: "swerl_metrics_test_items_total", Help: "test"})
	tParts = NewCounter(testNS, "parts", prometheus.CounterOpts{}) // Beam and live only
	tKinds = NewCounterVec(testNS, "kind", prometheus.CounterOpts{Name: "swerl_metrics_test_kinds_total", Help: "test"}, "kind")
	tTop   = NewMax(testNS, "top", prometheus.GaugeOpts{Name: "swerl_metrics_test_top", Help: "test"})
)

func init() {
	register.DoFn2x0[context.Context, int](&countFn{})
}

// countFn counts every element once on the bundle's goroutine and its
// parts from several goroutines at once, as the train DoFns do.
type countFn struct{}

func (countFn) ProcessElement(ctx context.Context, i int) {
	tItems.Add(ctx, 1)
	tKinds.With(strconv.Itoa(i%3)).Add(ctx, 1)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tParts.Add(ctx, 2)
			tTop.Observe(ctx, int64(i))
		}()
	}
	wg.Wait()
}

// The totals Read gets from a Prism pipeline result are what the DoFns
// counted, also from concurrent goroutines; Prometheus and the live
// totals agree, and counting outside a bundle reaches only those two.
func TestCountsReachThePipelineResult(t *testing.T) {
	const n = 300
	base := Mark([]*Counter{tItems, tParts}, tKinds)
	p, s := beam.NewPipelineWithRoot()
	xs := make([]int, n)
	for i := range xs {
		xs[i] = i
	}
	beam.ParDo0(s, &countFn{}, beam.Reshuffle(s, beam.CreateList(s, xs)))
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := Read(res, testNS)
	if !ok {
		t.Fatal("the pipeline result holds no metrics of the namespace")
	}
	if got := r.Count(tItems); got != n {
		t.Errorf("items %d, want %d", got, n)
	}
	if got := r.Count(tParts); got != 8*n {
		t.Errorf("parts %d, want %d", got, 8*n)
	}
	kinds := r.Counts(tKinds)
	if len(kinds) != 3 || kinds["0"] != n/3 || kinds["1"] != n/3 || kinds["2"] != n/3 {
		t.Errorf("kinds %v, want %d of each of 0, 1, 2", kinds, n/3)
	}
	if top, ok := r.Max(tTop); !ok || top != n-1 {
		t.Errorf("top %d %v, want %d", top, ok, n-1)
	}
	if got := base.Since(tItems); got != n {
		t.Errorf("live items %d, want %d (Prism runs the DoFns in this process)", got, n)
	}
	if got := gathered(t, "swerl_metrics_test_items_total"); got != n {
		t.Errorf("Prometheus items %v, want %d", got, n)
	}
	tItems.Add(context.Background(), 5)
	if got := base.Since(tItems); got != n+5 {
		t.Errorf("live items after counting outside a bundle %d, want %d", got, n+5)
	}
	if got := base.SinceVec(tKinds); got["1"] != n/3 {
		t.Errorf("live kinds %v", got)
	}
	if _, ok := Read(nil, testNS); ok {
		t.Error("a nil result reads as having metrics")
	}

	// RunTotals: the runner's totals where it reports them, else this
	// process's since the baseline (which now includes the 5).
	run := RunTotals(res, testNS, base)
	if !run.FromRunner() || run.Count(tItems) != n || run.Counts(tKinds)["2"] != n/3 {
		t.Errorf("run totals: from runner %v, items %d, kinds %v", run.FromRunner(), run.Count(tItems), run.Counts(tKinds))
	}
	local := RunTotals(nil, testNS, base)
	if local.FromRunner() || local.Count(tItems) != n+5 || local.Counts(tKinds)["0"] != n/3 {
		t.Errorf("local totals: from runner %v, items %d, kinds %v", local.FromRunner(), local.Count(tItems), local.Counts(tKinds))
	}
	for name, tot := range map[string]Totals{"run": run, "local": local} {
		if top, ok := tot.Max(tTop); !ok || top != n-1 {
			t.Errorf("%s top %d %v, want %d", name, top, ok, n-1)
		}
	}
}

// gathered is the value of the counter name on Registry.
func gathered(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("%s is not on the registry", name)
	return 0
}
