package report

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"html"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"swerl/internal/atomicfile"
	"swerl/internal/plot"
	"swerl/schemas"
	"swerl/sinks/parquetio"
)

// sampleRow is the projection of schemas.Sample the report reads: the large
// text columns (prompt, completion) are never loaded.
type sampleRow struct {
	InstanceID    string  `parquet:"instance_id"`
	GroupID       string  `parquet:"group_id"`
	PolicyVersion int64   `parquet:"policy_version"`
	Reward        float64 `parquet:"reward"`
	FormatError   string  `parquet:"format_error"`
	Advantage     float64 `parquet:"advantage"`
	GroupStd      float64 `parquet:"group_std"`
	CreatedAt     string  `parquet:"created_at"`
	Repo          string  `parquet:"repo"`
}

type instanceRow struct {
	ID   string `parquet:"id"`
	Repo string `parquet:"repo"`
}

// ParquetProjection marks sampleRow and instanceRow as reading a few
// columns of files that hold more (parquetio.Projection).
func (sampleRow) ParquetProjection()   {}
func (instanceRow) ParquetProjection() {}

// Data is what a report is drawn from.
type Data struct {
	Samples   []sampleRow
	Instances []instanceRow
	Versions  []schemas.WeightVersion
	Steps     []stepRow // the learner's step records
	Missing   []string  // inputs not found, named for the page
}

// ErrNoRunOutput is returned by Load and Write for a directory that holds
// none of a run's outputs: a report of nothing is almost always a wrong
// --out.
var ErrNoRunOutput = errors.New("report: no run output")

// Load reads a run's outputs from dir. Inputs that are absent are listed in
// Data.Missing and noted on the page; when all of them are absent it fails
// with ErrNoRunOutput naming what it looked for.
func Load(dir string) (*Data, error) {
	d := &Data{}
	var err error
	if fi, statErr := os.Stat(dir); statErr != nil {
		return nil, fmt.Errorf("report: %w", statErr)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("report: %s is not a directory", dir)
	}
	if d.Samples, err = parquetio.ReadDir[sampleRow](filepath.Join(dir, "samples")); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	if len(d.Samples) == 0 {
		d.Missing = append(d.Missing, "samples ("+filepath.Join(dir, "samples")+"/*.parquet)")
	}
	if d.Instances, err = parquetio.ReadDir[instanceRow](filepath.Join(dir, "instances")); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	if len(d.Instances) == 0 {
		d.Missing = append(d.Missing, "instances ("+filepath.Join(dir, "instances")+"/*.parquet)")
	}
	found := false
	for _, p := range []string{filepath.Join(dir, "index.parquet"), filepath.Join(dir, "checkpoints", "index.parquet")} {
		if _, statErr := os.Stat(p); errors.Is(statErr, fs.ErrNotExist) {
			continue
		}
		if d.Versions, err = parquetio.ReadFile[schemas.WeightVersion](p); err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		found = true
		break
	}
	if !found {
		d.Missing = append(d.Missing, "checkpoint index (index.parquet)")
	}
	if d.Steps, err = loadSteps(dir); err != nil {
		return nil, err
	}
	if len(d.Samples) == 0 && len(d.Instances) == 0 && !found {
		return nil, fmt.Errorf("%w in %s: found none of %s", ErrNoRunOutput, dir, strings.Join(d.Missing, ", "))
	}
	return d, nil
}

// Figure is one plot of the report.
type Figure struct {
	Name    string // file stem of the PNG copy
	Caption string
	Chart   *plot.Chart
}

// Summary holds the headline numbers of a run.
type Summary struct {
	Instances, Samples, Versions int
	MeanReward                   float64
	FormatErrorRate              float64
	ExactMatchRate               float64
	ZeroVarianceGroups, Groups   int
}

func summarize(d *Data) Summary {
	s := Summary{Instances: len(d.Instances), Samples: len(d.Samples), Versions: len(d.Versions)}
	groups := map[string]bool{}
	for _, r := range d.Samples {
		s.MeanReward += r.Reward
		if r.FormatError != "" || r.Reward == -1 {
			s.FormatErrorRate++
		}
		if r.Reward == 1 {
			s.ExactMatchRate++
		}
		if _, seen := groups[r.GroupID]; !seen {
			groups[r.GroupID] = r.GroupStd == 0
		}
	}
	if n := float64(len(d.Samples)); n > 0 {
		s.MeanReward /= n
		s.FormatErrorRate /= n
		s.ExactMatchRate /= n
	}
	s.Groups = len(groups)
	for _, zero := range groups {
		if zero {
			s.ZeroVarianceGroups++
		}
	}
	return s
}

// byVersion groups samples by policy version, in version order.
func byVersion(samples []sampleRow) ([]float64, [][]sampleRow) {
	m := map[int64][]sampleRow{}
	for _, r := range samples {
		m[r.PolicyVersion] = append(m[r.PolicyVersion], r)
	}
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	xs := make([]float64, len(keys))
	groups := make([][]sampleRow, len(keys))
	for i, k := range keys {
		xs[i], groups[i] = float64(k), m[k]
	}
	return xs, groups
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// sampleMean is the mean reward over all samples of groups.
func sampleMean(groups [][]sampleRow) float64 {
	var sum float64
	n := 0
	for _, g := range groups {
		for _, r := range g {
			sum += r.Reward
			n++
		}
	}
	return sum / float64(max(n, 1))
}

// trailing is, for each version, the mean reward of the samples of it and
// the w−1 versions before it.
func trailing(groups [][]sampleRow, w int) []float64 {
	out := make([]float64, len(groups))
	for i := range groups {
		out[i] = sampleMean(groups[max(0, i-w+1) : i+1])
	}
	return out
}

// Figures computes every plot of the report from d.
func Figures(d *Data) []Figure {
	xs, groups := byVersion(d.Samples)
	meanR := make([]float64, len(xs))
	fmtErr := make([]float64, len(xs))
	advStd := make([]float64, len(xs))
	zeroVar := make([]float64, len(xs))
	for i, g := range groups {
		var rs, advs []float64
		var errs float64
		seen := map[string]bool{}
		var zero, ngroups float64
		for _, r := range g {
			rs = append(rs, r.Reward)
			advs = append(advs, r.Advantage)
			if r.FormatError != "" || r.Reward == -1 {
				errs++
			}
			if !seen[r.GroupID] {
				seen[r.GroupID] = true
				ngroups++
				if r.GroupStd == 0 {
					zero++
				}
			}
		}
		meanR[i] = mean(rs)
		fmtErr[i] = errs / float64(len(g))
		m := mean(advs)
		var v float64
		for _, a := range advs {
			v += (a - m) * (a - m)
		}
		advStd[i] = math.Sqrt(v / float64(len(advs)))
		zeroVar[i] = zero / ngroups
	}
	rewardCaption := "Mean reward of the samples each policy version produced (−1 = format error, else patch similarity in [0,1]), and its trailing mean over 5 versions."
	if h := len(groups) / 2; h > 0 {
		rewardCaption += fmt.Sprintf(" Samples of versions %g–%g average %+.3f; of versions %g–%g, %+.3f.",
			xs[0], xs[h-1], sampleMean(groups[:h]), xs[h], xs[len(xs)-1], sampleMean(groups[h:]))
	}
	figs := []Figure{
		{"reward", rewardCaption,
			&plot.Chart{Title: "Mean reward by policy version", XLabel: "policy version", YLabel: "reward",
				Series: []plot.Series{{Name: "mean reward", X: xs, Y: meanR}, {Name: "trailing mean of 5", X: xs, Y: trailing(groups, 5)}}}},
		{"format_errors", "Fraction of samples whose answer could not be parsed or applied (reward −1).",
			&plot.Chart{Title: "Format-error rate by policy version", XLabel: "policy version", YLabel: "rate",
				Series: []plot.Series{{Name: "format errors", X: xs, Y: fmtErr}}}},
		{"advantage", "Spread of group-relative advantages, and the share of groups whose rewards were all equal (no learning signal).",
			&plot.Chart{Title: "Advantage spread by policy version", XLabel: "policy version", YLabel: "",
				Series: []plot.Series{{Name: "std of advantage", X: xs, Y: advStd}, {Name: "zero-variance groups", X: xs, Y: zeroVar}}}},
		staleness(d),
		throughput(d),
		perRepo(d),
	}
	if f := offPolicy(d); f != nil {
		figs = append(figs, *f)
	}
	return figs
}

func parseTime(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// staleness plots, for each sample, how many versions the learner had
// published beyond the sample's policy version when the sample was created.
func staleness(d *Data) Figure {
	type pub struct {
		at time.Time
		v  int64
	}
	var pubs []pub
	for _, v := range d.Versions {
		if t, ok := parseTime(v.CreatedAt); ok {
			pubs = append(pubs, pub{t, v.Version})
		}
	}
	slices.SortFunc(pubs, func(a, b pub) int { return a.at.Compare(b.at) })
	xs, groups := byVersion(d.Samples)
	ys := make([]float64, len(xs))
	for i, g := range groups {
		var st []float64
		for _, r := range g {
			t, ok := parseTime(r.CreatedAt)
			if !ok || len(pubs) == 0 {
				continue
			}
			// Before the first publication the sample's own version is the
			// newest there is.
			latest := r.PolicyVersion
			for _, p := range pubs {
				if p.at.After(t) {
					break
				}
				latest = max(latest, p.v)
			}
			st = append(st, float64(latest-r.PolicyVersion))
		}
		ys[i] = mean(st)
	}
	return Figure{"staleness", "Mean staleness: versions published by the learner beyond the version that produced the sample, at the time it was produced.",
		&plot.Chart{Title: "Policy staleness", XLabel: "policy version", YLabel: "versions behind",
			Series: []plot.Series{{Name: "staleness", X: xs, Y: ys}}}}
}

// throughput plots samples produced per minute over the run.
func throughput(d *Data) Figure {
	var ts []time.Time
	for _, r := range d.Samples {
		if t, ok := parseTime(r.CreatedAt); ok {
			ts = append(ts, t)
		}
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	var xs, ys []float64
	if len(ts) > 0 {
		span := ts[len(ts)-1].Sub(ts[0])
		bucket := max(span/30, time.Second)
		counts := map[int]int{}
		last := 0
		for _, t := range ts {
			b := int(t.Sub(ts[0]) / bucket)
			counts[b]++
			last = max(last, b)
		}
		for b := 0; b <= last; b++ {
			xs = append(xs, (time.Duration(b) * bucket).Minutes())
			ys = append(ys, float64(counts[b])/bucket.Minutes())
		}
	}
	return Figure{"throughput", "Samples scored per minute of wall-clock time.",
		&plot.Chart{Title: "Throughput", XLabel: "minutes since first sample", YLabel: "samples/min",
			Series: []plot.Series{{Name: "samples/min", X: xs, Y: ys}}}}
}

// perRepo plots the mean reward of each repository's samples.
func perRepo(d *Data) Figure {
	repoOf := map[string]string{}
	for _, in := range d.Instances {
		repoOf[in.ID] = in.Repo
	}
	sum := map[string]float64{}
	n := map[string]int{}
	for _, r := range d.Samples {
		repo := cmp.Or(r.Repo, repoOf[r.InstanceID], repoFromID(r.InstanceID))
		sum[repo] += r.Reward
		n[repo]++
	}
	repos := make([]string, 0, len(n))
	for r := range n {
		repos = append(repos, r)
	}
	slices.Sort(repos)
	if len(repos) > 20 {
		slices.SortFunc(repos, func(a, b string) int { return cmp.Compare(n[b], n[a]) })
		repos = repos[:20]
	}
	ys := make([]float64, len(repos))
	for i, r := range repos {
		ys[i] = sum[r] / float64(n[r])
	}
	return Figure{"per_repo", "Mean reward per repository (the 20 with most samples).",
		&plot.Chart{Title: "Mean reward per repository", YLabel: "reward", Categories: repos,
			Series: []plot.Series{{Name: "mean reward", Y: ys}}}}
}

func repoFromID(id string) string {
	if i := strings.LastIndexByte(id, '#'); i > 0 {
		return id[:i]
	}
	return id
}

// Write renders the report for the outputs in dir into dir/report and
// returns the path of the HTML page.
func Write(dir string) (string, error) {
	d, err := Load(dir)
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "report")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	figs := Figures(d)
	for _, f := range figs {
		if f.Chart.Empty() {
			continue
		}
		b, err := f.Chart.PNG(640, 360)
		if err != nil {
			return "", err
		}
		if err := atomicfile.WriteFile(filepath.Join(out, f.Name+".png"), b); err != nil {
			return "", err
		}
	}
	links, err := writeVersionPages(context.Background(), dir, out)
	if err != nil {
		return "", err
	}
	page := filepath.Join(out, "index.html")
	return page, atomicfile.WriteFile(page, []byte(renderHTML(dir, d, summarize(d), figs, links)))
}

func renderHTML(dir string, d *Data, s Summary, figs []Figure, links []versionLink) string {
	var b strings.Builder
	b.WriteString(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>swerl run report</title><style>
body{font-family:sans-serif;margin:2em;color:#222;max-width:1400px}
table{border-collapse:collapse}td,th{padding:4px 10px;border-bottom:1px solid #ddd;text-align:left}
.figs{display:flex;flex-wrap:wrap;gap:24px}figure{margin:0}figcaption{max-width:640px;font-size:13px;color:#555}
.missing{color:#a33}.empty{width:640px;height:120px;display:flex;align-items:center;justify-content:center;background:#f6f6f6;color:#777}
</style></head><body>`)
	fmt.Fprintf(&b, "<h1>swerl run report</h1><p>Outputs: <code>%s</code>, generated %s.</p>", html.EscapeString(dir), time.Now().UTC().Format(time.RFC3339))
	for _, m := range d.Missing {
		fmt.Fprintf(&b, `<p class="missing">Not found: %s</p>`, html.EscapeString(m))
	}
	b.WriteString(`<table id="summary">`)
	row := func(k, v string) { fmt.Fprintf(&b, "<tr><th>%s</th><td>%s</td></tr>", k, v) }
	row("instances", fmt.Sprint(s.Instances))
	row("samples", fmt.Sprint(s.Samples))
	row("groups (zero-variance)", fmt.Sprintf("%d (%d)", s.Groups, s.ZeroVarianceGroups))
	row("policy versions published", fmt.Sprint(s.Versions))
	row("mean reward", fmt.Sprintf("%.4f", s.MeanReward))
	row("format-error rate", fmt.Sprintf("%.2f%%", 100*s.FormatErrorRate))
	row("exact-match rate (reward = 1)", fmt.Sprintf("%.2f%%", 100*s.ExactMatchRate))
	b.WriteString(`</table><div class="figs">`)
	for _, f := range figs {
		fmt.Fprintf(&b, `<figure id="fig-%s">`, f.Name)
		if f.Chart.Empty() {
			fmt.Fprintf(&b, `<div class="empty">%s: no data</div>`, html.EscapeString(f.Chart.Title))
		} else {
			b.WriteString(f.Chart.SVG(640, 360))
		}
		fmt.Fprintf(&b, `<figcaption>%s`, html.EscapeString(f.Caption))
		if !f.Chart.Empty() {
			fmt.Fprintf(&b, ` <a href="%s.png">PNG</a>`, f.Name)
		}
		b.WriteString("</figcaption></figure>")
	}
	b.WriteString("</div>")
	renderVersionTable(&b, links)
	b.WriteString("</body></html>\n")
	return b.String()
}
