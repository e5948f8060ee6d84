package report

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"swerl/internal/atomicfile"
	"swerl/sinks/checkpoint"
	"swerl/sinks/lineage"
)

// VersionsDir is the folder under report/ that holds one page a trained
// version.
const VersionsDir = "versions"

// versionLink is a row of the index page's table of trained versions.
type versionLink struct {
	Version, Step    int64
	Samples, Missing int
	MeanReward       float64
	Exact            int // samples whose answer reproduces the oracle
	Page             string
}

// writeVersionPages writes report/versions/vNNNNNN.html for every version
// whose step record (trained/) lists samples: what trained it, from
// sinks/lineage, each answer next to its task's oracle patch with its
// reward and advantage. A run without step records has no pages.
func writeVersionPages(ctx context.Context, dir, out string) ([]versionLink, error) {
	steps, err := lineage.All(ctx, lineage.Dirs(dir, "", ""))
	if err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "trained")); errors.Is(statErr, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("report: %w", err)
	}
	if len(steps) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(filepath.Join(out, VersionsDir), 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var links []versionLink
	for _, st := range steps {
		l := versionLink{Version: st.Version, Step: st.Step, Samples: len(st.Samples), Missing: len(st.Missing),
			Page: VersionsDir + "/" + checkpoint.VersionDir(st.Version) + ".html"}
		for _, s := range st.Samples {
			l.MeanReward += s.Reward / float64(len(st.Samples))
			if s.Task != nil && s.FormatError == "" && s.OracleDiff == "" && s.AnswerPatch != "" {
				l.Exact++
			}
		}
		if err := atomicfile.WriteFile(filepath.Join(out, l.Page), []byte(renderVersion(st))); err != nil {
			return nil, err
		}
		links = append(links, l)
	}
	return links, nil
}

const versionCSS = `body{font-family:sans-serif;margin:2em;color:#222;max-width:1600px}
table{border-collapse:collapse}td,th{padding:4px 10px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:12px}.pair pre{margin:0;padding:8px;background:#f6f6f6;overflow-x:auto;font-size:12px;max-height:420px}
.sample{border-top:1px solid #ccc;padding:8px 0}.pos{color:#070}.neg{color:#a00}.group{margin-top:2em}.missing{color:#a33}`

// renderVersion is the page of one trained version.
func renderVersion(st *lineage.Step) string {
	var b strings.Builder
	esc := html.EscapeString
	fmt.Fprintf(&b, `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>swerl: what trained version %d</title><style>%s</style></head><body>`, st.Version, versionCSS)
	fmt.Fprintf(&b, `<p><a href="../index.html">report</a></p><h1>What trained version %d</h1><table id="step">`, st.Version)
	row := func(k, v string) { fmt.Fprintf(&b, "<tr><th>%s</th><td>%s</td></tr>", k, v) }
	row("learner step", fmt.Sprint(st.Step))
	if ix := st.Index; ix != nil {
		row("from version", fmt.Sprint(ix.Parent))
		row("loss / KL", fmt.Sprintf("%.6f / %.6f", ix.Loss, ix.KL))
		row("published", esc(ix.CreatedAt))
	}
	row("samples", fmt.Sprint(len(st.Samples)))
	if len(st.Dropped) > 0 {
		row("dropped since the previous version", fmt.Sprint(len(st.Dropped)))
	}
	b.WriteString("</table>")
	for _, id := range st.Missing {
		fmt.Fprintf(&b, `<p class="missing">Sample %s is in the step record but not in samples/.</p>`, esc(id))
	}
	group := ""
	for _, s := range st.Samples {
		if s.GroupID != group {
			if group != "" {
				b.WriteString("</section>")
			}
			group = s.GroupID
			fmt.Fprintf(&b, `<section class="group" id="%s"><h2>%s</h2><p>`, esc(s.GroupID), esc(s.InstanceID))
			if in := s.Instance; in != nil {
				if in.PRNumber > 0 {
					fmt.Fprintf(&b, "PR %s#%d: %s, merge <code>%s</code>", esc(in.Repo), in.PRNumber, esc(in.PRTitle), esc(in.MergeCommit))
				} else {
					fmt.Fprintf(&b, "commit <code>%s</code> of %s: %s", esc(in.MergeCommit), esc(in.Repo), esc(in.PRTitle))
				}
			} else {
				b.WriteString(`<span class="missing">instance not in instances/</span>`)
			}
			fmt.Fprintf(&b, "; sampled by version %d, group mean reward %.4f, std %.4f</p>", s.PolicyVersion, s.GroupMean, s.GroupStd)
		}
		cls := "neg"
		if s.Advantage > 0 {
			cls = "pos"
		}
		fmt.Fprintf(&b, `<div class="sample" id="%s"><p><b>%s</b>: reward %.4f, advantage <span class="%s">%+.4f</span>, finish %s`,
			esc(s.ID), esc(s.ID), s.Reward, cls, s.Advantage, esc(s.FinishReason))
		if s.FormatError != "" {
			fmt.Fprintf(&b, `, format error: %s`, esc(s.FormatError))
		}
		answer, what := s.AnswerPatch, "answer (as a patch)"
		if answer == "" {
			answer, what = s.Completion, "answer (the completion as sampled)"
		}
		fmt.Fprintf(&b, `</p><div class="pair"><div><h3>%s</h3><pre class="answer">%s</pre></div><div><h3>oracle patch</h3><pre class="oracle">%s</pre></div></div></div>`,
			what, esc(strings.ToValidUTF8(answer, "\uFFFD")), esc(s.OraclePatch))
	}
	if group != "" {
		b.WriteString("</section>")
	}
	b.WriteString("</body></html>\n")
	return b.String()
}

// renderVersionTable is the index page's table of trained versions.
func renderVersionTable(b *strings.Builder, links []versionLink) {
	if len(links) == 0 {
		return
	}
	b.WriteString(`<h2>What trained each version</h2><table id="versions"><tr><th>version</th><th>step</th><th>samples</th><th>mean reward</th><th>answers equal to the oracle</th></tr>`)
	for _, l := range links {
		fmt.Fprintf(b, `<tr><td><a href="%s">v%d</a></td><td>%d</td><td>%d`, l.Page, l.Version, l.Step, l.Samples)
		if l.Missing > 0 {
			fmt.Fprintf(b, ` <span class="missing">(%d not found)</span>`, l.Missing)
		}
		fmt.Fprintf(b, "</td><td>%.4f</td><td>%d</td></tr>", l.MeanReward, l.Exact)
	}
	b.WriteString("</table>")
}
