package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"swerl/sinks/lineage"
)

func init() {
	register(&command{name: "explain", summary: "list what trained a version (or one sample): PR, prompt, answer, reward, advantage, step", run: runExplain})
}

func runExplain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("explain", "--out DIR (--version N | --sample ID) [--json]", stderr)
	out := fs.String("out", "swerl-out", "the learner's output directory (trained/vNNNNNN.json, index.parquet)")
	version := fs.Int64("version", -1, "the version to explain: the samples its learner step trained on")
	sample := fs.String("sample", "", "one sample id (\"<group id>/<index>\"): the version that trained it and its lineage")
	samples := fs.String("samples", "", "the samples' Parquet directory (default DIR/samples)")
	instances := fs.String("instances", "", "the instances' Parquet directory (default DIR/instances)")
	asJSON := fs.Bool("json", false, "one JSON object a sample (JSONL) instead of text")
	full := fs.Bool("full", false, "print whole prompts and completions (text; default: their first lines)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if (*version >= 0) == (*sample != "") {
		return usagef("name one of --version N and --sample ID")
	}
	paths := lineage.Dirs(*out, *samples, *instances)
	var st *lineage.Step
	var err error
	if *sample != "" {
		st, err = lineage.Sample(ctx, paths, *sample)
	} else {
		st, err = lineage.Version(ctx, paths, *version)
	}
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(stdout, 1<<16)
	if *asJSON {
		err = explainJSON(w, st)
	} else {
		explainText(w, st, *full)
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if err == nil && len(st.Missing) > 0 {
		err = fmt.Errorf("%d sample(s) of the step record of version %d are not in %s (first: %s)", len(st.Missing), st.Version, paths.Samples, st.Missing[0])
	}
	return err
}

// explained is one line of --json: a trained sample and what it joins to.
type explained struct {
	Version       int64    `json:"version"`
	Step          int64    `json:"step"`
	Parent        *int64   `json:"parent,omitempty"`
	Loss          *float64 `json:"loss,omitempty"`
	SampleID      string   `json:"sample_id"`
	GroupID       string   `json:"group_id"`
	InstanceID    string   `json:"instance_id"`
	Repo          string   `json:"repo"`
	PRNumber      int      `json:"pr_number,omitempty"`
	MergeCommit   string   `json:"merge_commit,omitempty"`
	BaseCommit    string   `json:"base_commit,omitempty"`
	PRTitle       string   `json:"pr_title,omitempty"`
	PolicyVersion int64    `json:"policy_version"`
	System        string   `json:"system,omitempty"`
	Prompt        string   `json:"prompt"`
	Completion    string   `json:"completion"`
	Reward        float64  `json:"reward"`
	FormatError   string   `json:"format_error,omitempty"`
	Advantage     float64  `json:"advantage"`
	GroupMean     float64  `json:"group_mean"`
	GroupStd      float64  `json:"group_std"`
	OraclePatch   string   `json:"oracle_patch,omitempty"` // the task's oracle change (a hunk task's: that hunk)
	AnswerPatch   string   `json:"answer_patch,omitempty"`
	DiffVsOracle  string   `json:"diff_vs_oracle,omitempty"`
	Copies        int      `json:"copies"`
	// Task is the id of the instance joined (the sample's instance_id, or
	// for a hunk task its pull request's); empty when instances/ lacks it.
	Task string `json:"instance,omitempty"`
}

func explainJSON(w io.Writer, st *lineage.Step) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, t := range st.Samples {
		e := explained{Version: st.Version, Step: st.Step, SampleID: t.ID, GroupID: t.GroupID, InstanceID: t.InstanceID,
			Repo: t.Repo, PolicyVersion: t.PolicyVersion, System: t.System, Prompt: t.Prompt, Completion: t.Completion,
			Reward: t.Reward, FormatError: t.FormatError, Advantage: t.Advantage, GroupMean: t.GroupMean, GroupStd: t.GroupStd,
			AnswerPatch: t.AnswerPatch, DiffVsOracle: t.OracleDiff, Copies: t.Copies}
		if st.Index != nil {
			e.Parent, e.Loss = &st.Index.Parent, &st.Index.Loss
		}
		if in := t.Instance; in != nil {
			e.Task, e.Repo, e.PRNumber, e.MergeCommit, e.BaseCommit, e.PRTitle, e.OraclePatch =
				in.ID, in.Repo, in.PRNumber, in.MergeCommit, in.BaseCommit, in.PRTitle, t.OraclePatch
		}
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	return nil
}

func explainText(w io.Writer, st *lineage.Step, full bool) {
	fmt.Fprintf(w, "version %d (learner step %d", st.Version, st.Step)
	if ix := st.Index; ix != nil {
		fmt.Fprintf(w, ", from version %d, loss %.6f, KL %.6f, mean reward %.4f, published %s", ix.Parent, ix.Loss, ix.KL, ix.MeanReward, ix.CreatedAt)
	} else {
		fmt.Fprint(w, ", not in the checkpoint index")
	}
	fmt.Fprintf(w, "): %d samples", len(st.Samples))
	if len(st.Missing) > 0 {
		fmt.Fprintf(w, ", %d not found", len(st.Missing))
	}
	if len(st.Dropped) > 0 {
		fmt.Fprintf(w, ", %d dropped since the previous version", len(st.Dropped))
	}
	fmt.Fprintln(w)
	group := ""
	for _, t := range st.Samples {
		if t.GroupID != group {
			group = t.GroupID
			fmt.Fprintf(w, "\ngroup %s (sampled by version %d, %d samples, mean reward %.4f, std %.4f)\n", group, t.PolicyVersion, t.GroupSize, t.GroupMean, t.GroupStd)
			if in := t.Instance; in != nil {
				fmt.Fprintf(w, "  instance %s", t.InstanceID)
				if in.ID != t.InstanceID {
					fmt.Fprintf(w, " (a hunk of %s)", in.ID)
				}
				if in.PRNumber > 0 {
					fmt.Fprintf(w, ": PR %s#%d %q, merge %s, base %s\n", in.Repo, in.PRNumber, in.PRTitle, in.MergeCommit, in.BaseCommit)
				} else {
					fmt.Fprintf(w, ": commit %s of %s %q, parent %s\n", in.MergeCommit, in.Repo, in.PRTitle, in.BaseCommit)
				}
			} else {
				fmt.Fprintf(w, "  instance %s: not in the instances' Parquet files\n", t.InstanceID)
			}
			fmt.Fprintf(w, "  prompt: %s\n", excerpt(t.Prompt, full))
		}
		fmt.Fprintf(w, "  sample %s: reward %+.4f, advantage %+.4f, finish %s", t.ID, t.Reward, t.Advantage, t.FinishReason)
		if t.Copies > 1 {
			fmt.Fprintf(w, " (%d copies in samples/, trained once)", t.Copies)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "    completion: %s\n", excerpt(t.Completion, full))
		switch {
		case t.FormatError != "":
			fmt.Fprintf(w, "    format error: %s\n", t.FormatError)
		case t.Task == nil:
			fmt.Fprintln(w, "    (the task's code could not be rebuilt from its instance: no diff)")
		case t.OracleDiff == "":
			fmt.Fprintln(w, "    the answer reproduces the oracle change")
		default:
			fmt.Fprintf(w, "    diff against the oracle (a/ oracle, b/ answer):\n%s", indent(t.OracleDiff, "      "))
		}
	}
	for _, id := range st.Missing {
		fmt.Fprintf(w, "\nsample %s: listed in the step record, not found in the samples' Parquet files\n", id)
	}
}

// excerpt is s whole (full), or its first line with the count of the rest.
func excerpt(s string, full bool) string {
	if full {
		return "\n" + indent(s, "      ")
	}
	first, rest, more := strings.Cut(strings.TrimSpace(s), "\n")
	if len(first) > 160 {
		first = first[:160] + "…"
	}
	if more {
		return fmt.Sprintf("%q (+%d lines, %d bytes)", first, strings.Count(rest, "\n")+1, len(s))
	}
	return fmt.Sprintf("%q", first)
}

func indent(s, by string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString(by + l)
		}
	}
	if !strings.HasSuffix(s, "\n") {
		b.WriteString("\n")
	}
	return b.String()
}
