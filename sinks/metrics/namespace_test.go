package metrics

import (
	"context"
	"testing"
)

// A Namespace's metrics carry its Prometheus prefix and help (none for a
// count declared without a Prometheus name), and its Mark is a baseline
// of every counter and family it declared: counts made before the mark do
// not show in Since, counts made after do.
func TestNamespace(t *testing.T) {
	ctx := context.Background()
	ns := NewNamespace("swerl.namespace_test", "swerl_namespace_test_")
	a := ns.Counter("a", "a_total", "help of a")
	b := ns.Counter("b", "", "")
	v := ns.CounterVec("v", "v_total", "help of v", "kind")
	m := ns.Max("m", "m", "help of m")
	a.Add(ctx, 3)
	b.Add(ctx, 4)
	v.With("x").Add(ctx, 5)
	m.Observe(ctx, 7)
	base := ns.Mark()
	a.Add(ctx, 1)
	b.Add(ctx, 2)
	v.With("x").Add(ctx, 6)
	if base.Since(a) != 1 || base.Since(b) != 2 || base.SinceVec(v)["x"] != 6 {
		t.Errorf("since the mark: a %d, b %d, v %v; want 1, 2, x:6", base.Since(a), base.Since(b), base.SinceVec(v))
	}
	tot := ns.Totals(nil, base)
	if tot.FromRunner() || tot.Count(a) != 1 || tot.Counts(v)["x"] != 6 {
		t.Errorf("totals without a result: from runner %v, a %d, v %v", tot.FromRunner(), tot.Count(a), tot.Counts(v))
	}
	mfs, err := Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	help := map[string]string{}
	for _, mf := range mfs {
		help[mf.GetName()] = mf.GetHelp()
	}
	for name, want := range map[string]string{
		"swerl_namespace_test_a_total": "help of a",
		"swerl_namespace_test_v_total": "help of v",
		"swerl_namespace_test_m":       "help of m",
	} {
		if got, ok := help[name]; !ok || got != want {
			t.Errorf("%s: help %q (registered %v), want %q", name, got, ok, want)
		}
	}
	for name := range help {
		if name == "swerl_namespace_test_" || name == "swerl_namespace_test_b" {
			t.Errorf("%s is registered: b has no Prometheus name", name)
		}
	}
	if got := gathered(t, "swerl_namespace_test_a_total"); got != 4 {
		t.Errorf("Prometheus a %v, want 4", got)
	}
}
