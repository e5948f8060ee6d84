package agentless

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"time"

	"swerl/internal/difflib"
	"swerl/transforms/prompt"
	"swerl/transforms/rollout"
)

// localizationPrompt is Agentless Mini's LOCALIZATION prompt
// (utils/prompts.py).
const localizationPrompt = `Please look through a given GitHub issue and repository structure and provide a list of files that one would need to edit or look at to solve the issue.

### GitHub Problem Description ###
{problem_statement}

###

### Repository Structure ###
{structure}


###

Only provide the full path and return at most {n} files. The returned files should be separated by new lines ordered by most to least important and wrapped with ` + "```" + `. For example:

` + "```" + `
most/important/file1.xx
less/important/file2.yy
least/important/file3.zz
` + "```"

// repairPrompt is AGENTLESS_REPAIR (swerl/core/prompts.py).
const repairPrompt = `We are currently solving the following issue within our repository. Here is the issue text:
--- BEGIN ISSUE ---
{problem_statement}
--- END ISSUE ---

Below are some code segments, each from a relevant file. One or more of these files may contain bugs.

--- BEGIN FILE ---
` + "```" + `
{content}
` + "```" + `
--- END FILE ---

` + prompt.EditInstructions

// Instance is one SWE-bench row with its repository read at base_commit.
type Instance struct {
	ID      string
	Problem string
	// Files maps every Python file of the tree at base_commit to its text.
	Files map[string]string
	// Commit is base_commit (for the Executor).
	Commit string
}

// Options configure Solve.
type Options struct {
	LocalizeSamples int     // default 1
	RepairSamples   int     // default 1
	MaxFiles        int     // default 5
	Temperature     float64 // repair sampling; 0: the policy's default
	MaxTokens       int     // per answer; default 4096
	// MaxInputTokens bounds the repair prompt's file contents, counted as
	// bytes/4; files past it are left out. Default 60000.
	MaxInputTokens int
	Seed           int64
	Model          string // model_name_or_path of the prediction
	// Executor, when set, runs the tests with each candidate applied; only
	// the candidates with the fewest failures then vote.
	Executor Executor
}

func (o *Options) defaults() {
	if o.LocalizeSamples <= 0 {
		o.LocalizeSamples = 1
	}
	if o.RepairSamples <= 0 {
		o.RepairSamples = 1
	}
	if o.MaxFiles <= 0 {
		o.MaxFiles = 5
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = 4096
	}
	if o.MaxInputTokens <= 0 {
		o.MaxInputTokens = 60000
	}
}

// Candidate is one repair sample and what became of it.
type Candidate struct {
	InstanceID string `parquet:"instance_id" json:"instance_id"`
	Stage      string `parquet:"stage" json:"stage"` // "repair"
	Sample     int    `parquet:"sample" json:"sample"`
	RawPatch   string `parquet:"raw_patch" json:"raw_patch"`
	ModelPatch string `parquet:"model_patch" json:"model_patch"`
	Normalized string `parquet:"normalized_patch" json:"normalized_patch"`
	Votes      int    `parquet:"votes" json:"votes"`
	Chosen     bool   `parquet:"chosen" json:"chosen"`
	Failures   int    `parquet:"test_failures" json:"test_failures"` // -1: not run
	Dropped    string `parquet:"dropped" json:"dropped,omitempty"`
}

// Prediction is a SWE-bench prediction line.
type Prediction struct {
	InstanceID string `json:"instance_id"`
	Model      string `json:"model_name_or_path"`
	ModelPatch string `json:"model_patch"`
}

// Outcome is everything Solve learned about one instance.
type Outcome struct {
	Prediction Prediction
	Localized  []string // files shown to repair, in rank order
	Omitted    []string // localized files left out of the repair prompt (token budget)
	Candidates []Candidate
	// MalformedLocalizations counts localization answers that named no
	// existing file.
	MalformedLocalizations int
	PolicyTime             time.Duration // waiting on the policy
	Time                   time.Duration // all of Solve
	// Stages is the time of each stage, policy time included: localize,
	// repair (the request), apply, normalize, vote (tests included).
	Stages StageTimes
}

// StageTimes is the wall time of each stage of one instance.
type StageTimes struct {
	Localize, Repair, Apply, Normalize, Vote time.Duration
}

// isTestPath is filter_out_test_files: a path with any component that
// starts with "test" is left out of the tree shown to the model.
func isTestPath(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if strings.HasPrefix(c, "test") {
			return true
		}
	}
	return false
}

type dirNode struct {
	name     string
	children []*dirNode
	file     bool
}

// structure renders the Python files as show_project_structure does: one
// name a line, indented by depth; with rng, entries are shuffled (the
// variation Agentless Mini uses when sampling more than once).
func structure(paths []string, indentation int, rng *rand.Rand) string {
	root := &dirNode{}
	index := map[string]*dirNode{"": root}
	for _, p := range paths {
		parts := strings.Split(p, "/")
		cur := root
		for i, part := range parts {
			key := strings.Join(parts[:i+1], "/")
			n, ok := index[key]
			if !ok {
				n = &dirNode{name: part, file: i == len(parts)-1}
				index[key] = n
				cur.children = append(cur.children, n)
			}
			cur = n
		}
	}
	var b strings.Builder
	var walk func(n *dirNode, level int)
	walk = func(n *dirNode, level int) {
		kids := append([]*dirNode(nil), n.children...)
		if rng != nil {
			rng.Shuffle(len(kids), func(i, j int) { kids[i], kids[j] = kids[j], kids[i] })
		}
		for _, k := range kids {
			b.WriteString(strings.Repeat(" ", level*indentation) + k.name + "\n")
			if !k.file {
				walk(k, level+1)
			}
		}
	}
	walk(root, 0)
	return strings.TrimSpace(b.String())
}

// stripThinking drops a leading <think>…</think> section of an answer.
func stripThinking(s string) string {
	if i := strings.Index(s, "</think>"); i >= 0 {
		return s[i+len("</think>"):]
	}
	return s
}

// Solve runs Agentless Mini on one instance: localize, repair, normalize,
// vote. The policy's errors end it; malformed answers are counted and
// dropped.
func Solve(ctx context.Context, pol rollout.Policy, in Instance, o Options) (Outcome, error) {
	o.defaults()
	start := time.Now()
	out := Outcome{Prediction: Prediction{InstanceID: in.ID, Model: o.Model}}
	rng := rand.New(rand.NewSource(o.Seed ^ int64(len(in.ID))<<32 ^ int64(hashString(in.ID))))
	var paths []string
	for p := range in.Files {
		if strings.HasSuffix(p, ".py") && !isTestPath(p) {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	exists := map[string]bool{}
	for _, p := range paths {
		exists[p] = true
	}

	// Localize: one request a sample, each with its own presentation.
	stage := time.Now()
	var ranked [][]string
	for s := 0; s < o.LocalizeSamples; s++ {
		n, indent := 5, 4
		var r *rand.Rand
		if o.LocalizeSamples > 1 {
			n, indent, r = 2+rng.Intn(4), []int{2, 4}[rng.Intn(2)], rng
		}
		prompt := strings.NewReplacer("{problem_statement}", in.Problem, "{structure}", structure(paths, indent, r),
			"{n}", fmt.Sprint(n)).Replace(localizationPrompt)
		t0 := time.Now()
		resp, err := pol.Complete(ctx, rollout.Request{InstanceID: in.ID, Prompt: prompt, N: 1, MaxTokens: o.MaxTokens, Seed: o.Seed + int64(s)})
		out.PolicyTime += time.Since(t0)
		if err != nil {
			return out, fmt.Errorf("agentless: %s: localize: %w", in.ID, err)
		}
		var found []string
		for _, c := range resp.Completions {
			for _, l := range strings.Split(strings.TrimSpace(stripThinking(c.Text)), "\n") {
				if exists[l] {
					found = append(found, l)
				}
			}
		}
		if len(found) == 0 {
			out.MalformedLocalizations++
		}
		ranked = append(ranked, found)
	}
	out.Stages.Localize = time.Since(stage)
	// Merge in rank order: every sample's first file, then every second...
	seen := map[string]bool{}
	for rank := 0; len(out.Localized) < o.MaxFiles; rank++ {
		any := false
		for _, f := range ranked {
			if rank < len(f) {
				any = true
				if !seen[f[rank]] && len(out.Localized) < o.MaxFiles {
					seen[f[rank]] = true
					out.Localized = append(out.Localized, f[rank])
				}
			}
		}
		if !any {
			break
		}
	}
	if len(out.Localized) == 0 {
		out.Time = time.Since(start)
		return out, nil
	}

	// Repair: the localized files' contents within the token budget.
	files := map[string]string{}
	var parts []string
	tokens := 0
	for _, p := range out.Localized {
		content := strings.Join(difflib.SplitLines(in.Files[p], false), "\n")
		block := "### " + p + "\n" + content
		if n := len(block) / 4; tokens+n > o.MaxInputTokens {
			out.Omitted = append(out.Omitted, p)
			continue
		} else {
			tokens += n
		}
		files[p] = content
		parts = append(parts, block)
	}
	if len(parts) == 0 { // as construct_topn_file_context: the first file anyway
		p := out.Localized[0]
		files[p] = strings.Join(difflib.SplitLines(in.Files[p], false), "\n")
		parts = append(parts, "### "+p+"\n"+files[p])
		out.Omitted = out.Omitted[1:]
	}
	prompt := strings.NewReplacer("{problem_statement}", in.Problem, "{content}", strings.Join(parts, "\n\n")).Replace(repairPrompt)
	t0 := time.Now()
	stage = t0
	resp, err := pol.Complete(ctx, rollout.Request{InstanceID: in.ID, Prompt: prompt, N: o.RepairSamples,
		MaxTokens: o.MaxTokens, Temperature: o.Temperature, Seed: o.Seed})
	out.PolicyTime += time.Since(t0)
	if err != nil {
		return out, fmt.Errorf("agentless: %s: repair: %w", in.ID, err)
	}
	out.Stages.Repair = time.Since(stage)
	eng := Memoize(DefaultEngine()) // the samples share the original files
	var normalized []string
	for i, c := range resp.Completions {
		stage = time.Now()
		r, perr := safeApply(c.Text, files, eng.Parses)
		out.Stages.Apply += time.Since(stage)
		stage = time.Now()
		cand := Candidate{InstanceID: in.ID, Stage: "repair", Sample: i, RawPatch: r.RawModelPatch, ModelPatch: r.ModelPatch, Dropped: r.Dropped, Failures: -1}
		if perr != nil {
			cand.Dropped = perr.Error()
		}
		if r.ModelPatch == "" && cand.Dropped == "" {
			cand.Dropped = DropNoEdit
		}
		if r.ModelPatch != "" {
			norm, err := NormalizePatch(r.ModelPatch, r.Originals, r.NewContents, r.EditedFiles, eng)
			if err != nil {
				cand.Dropped = "normalize: " + err.Error()
			} else {
				cand.Normalized = norm
			}
		}
		normalized = append(normalized, cand.Normalized)
		out.Candidates = append(out.Candidates, cand)
		out.Stages.Normalize += time.Since(stage)
	}
	stage = time.Now()

	// Vote.
	votes := map[string]int{}
	for _, n := range normalized {
		if k := pyStrip(n); k != "" {
			votes[k]++
		}
	}
	for i := range out.Candidates {
		out.Candidates[i].Votes = votes[pyStrip(out.Candidates[i].Normalized)]
	}
	best := -1
	if o.Executor != nil {
		failures := make([]int, len(normalized))
		for i := range out.Candidates {
			c := &out.Candidates[i]
			if pyStrip(c.Normalized) == "" {
				continue
			}
			n, err := o.Executor.Failures(ctx, in.Commit, c.ModelPatch)
			if err != nil {
				// A patch the executor cannot run counts as failing
				// everything the others might pass.
				n = 1 << 30
				c.Dropped = "tests: " + err.Error()
			}
			c.Failures, failures[i] = n, n
		}
		best = RerankWithTests(normalized, failures)
	} else {
		best = MajorityVote(normalized)
	}
	if best >= 0 {
		out.Candidates[best].Chosen = true
		out.Prediction.ModelPatch = out.Candidates[best].ModelPatch
	}
	out.Stages.Vote = time.Since(stage)
	out.Time = time.Since(start)
	return out, nil
}

func hashString(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

// safeApply is ApplyAnswer with a panic (a bug) turned into an error, so
// one answer cannot stop a run.
func safeApply(answer string, files map[string]string, parses SyntaxChecker) (r Repair, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = Repair{}, fmt.Errorf("internal error applying the answer: %v", p)
		}
	}()
	return ApplyAnswer(answer, files, parses), nil
}
