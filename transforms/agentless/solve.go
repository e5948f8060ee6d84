package agentless

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"time"

	"swerl/internal/defaults"
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
	LocalizeSamples int     // default: DefaultOptions'
	RepairSamples   int     // default: DefaultOptions'
	MaxFiles        int     // default: DefaultOptions'
	Temperature     float64 // repair sampling; 0: the policy's default
	MaxTokens       int     // per answer; default: DefaultOptions'
	// MaxInputTokens bounds the repair prompt's file contents, counted as
	// bytes/4; files past it are left out. Default: DefaultOptions'.
	MaxInputTokens int
	Seed           int64
	Model          string // model_name_or_path of the prediction
	// Executor, when set, runs the tests with each candidate applied; only
	// the candidates with the fewest failures then vote.
	Executor Executor
}

// DefaultOptions holds the defaults of Options' counts: what a zero
// field means, and where swerl agentless's flags start.
var DefaultOptions = Options{LocalizeSamples: 1, RepairSamples: 1, MaxFiles: 5, MaxTokens: 4096, MaxInputTokens: 60000}

// WithDefaults is o with its zero fields set to their defaults.
func (o Options) WithDefaults() Options {
	o.defaults()
	return o
}

func (o *Options) defaults() {
	d := DefaultOptions
	o.LocalizeSamples = defaults.Positive(o.LocalizeSamples, d.LocalizeSamples)
	o.RepairSamples = defaults.Positive(o.RepairSamples, d.RepairSamples)
	o.MaxFiles = defaults.Positive(o.MaxFiles, d.MaxFiles)
	o.MaxTokens = defaults.Positive(o.MaxTokens, d.MaxTokens)
	o.MaxInputTokens = defaults.Positive(o.MaxInputTokens, d.MaxInputTokens)
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

// LocalizablePaths is the files the localization prompt shows: the
// Python files of paths that are not test files, sorted.
func LocalizablePaths(paths []string) []string {
	var out []string
	for _, p := range paths {
		if strings.HasSuffix(p, ".py") && !isTestPath(p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// LocalizePrompts returns the localization prompt of each of the
// o.LocalizeSamples samples of instance id, whose tree's localizable files
// are paths (LocalizablePaths). With more than one sample each prompt has
// its own presentation of the tree (number of files asked for, indent,
// order), drawn from one generator seeded by o.Seed and id, so the prompts
// are the same wherever they are built.
func LocalizePrompts(id, problem string, paths []string, o Options) []string {
	o.defaults()
	rng := rand.New(rand.NewSource(o.Seed ^ int64(len(id))<<32 ^ int64(hashString(id))))
	prompts := make([]string, o.LocalizeSamples)
	for s := range prompts {
		n, indent := 5, 4
		var r *rand.Rand
		if o.LocalizeSamples > 1 {
			n, indent, r = 2+rng.Intn(4), []int{2, 4}[rng.Intn(2)], rng
		}
		prompts[s] = strings.NewReplacer("{problem_statement}", problem, "{structure}", structure(paths, indent, r),
			"{n}", fmt.Sprint(n)).Replace(localizationPrompt)
	}
	return prompts
}

// LocalizeRequest is the policy request of localization sample s.
func LocalizeRequest(id, prompt string, s int, o Options) rollout.Request {
	o.defaults()
	return rollout.Request{InstanceID: id, Prompt: prompt, N: 1, MaxTokens: o.MaxTokens, Seed: o.Seed + int64(s)}
}

// ParseLocalization returns the lines of a localization sample's answers
// that name a file of the tree (exists), in order; none means the sample
// is malformed.
func ParseLocalization(answers []string, exists map[string]bool) []string {
	var found []string
	for _, a := range answers {
		for _, l := range strings.Split(strings.TrimSpace(stripThinking(a)), "\n") {
			if exists[l] {
				found = append(found, l)
			}
		}
	}
	return found
}

// MergeLocalizations merges the samples' files in rank order (every
// sample's first file, then every second…), without repeats, into at most
// maxFiles.
func MergeLocalizations(ranked [][]string, maxFiles int) []string {
	var out []string
	seen := map[string]bool{}
	for rank := 0; len(out) < maxFiles; rank++ {
		any := false
		for _, f := range ranked {
			if rank < len(f) {
				any = true
				if !seen[f[rank]] && len(out) < maxFiles {
					seen[f[rank]] = true
					out = append(out, f[rank])
				}
			}
		}
		if !any {
			break
		}
	}
	return out
}

// RepairInput is the repair prompt of an instance and the files it shows.
type RepairInput struct {
	Prompt  string
	Files   map[string]string // shown files, as the prompt shows them
	Omitted []string          // localized files the token budget left out
}

// BuildRepair makes the repair prompt from the localized files' contents
// (read maps each localized path to its text), within o.MaxInputTokens
// (bytes/4): files that do not fit are left out, except that the first is
// shown when none fits (as construct_topn_file_context does). localized
// must not be empty.
func BuildRepair(problem string, localized []string, read map[string]string, o Options) RepairInput {
	o.defaults()
	in := RepairInput{Files: map[string]string{}}
	var parts []string
	tokens := 0
	for _, p := range localized {
		content := strings.Join(difflib.SplitLines(read[p], false), "\n")
		block := "### " + p + "\n" + content
		if n := len(block) / 4; tokens+n > o.MaxInputTokens {
			in.Omitted = append(in.Omitted, p)
			continue
		} else {
			tokens += n
		}
		in.Files[p] = content
		parts = append(parts, block)
	}
	if len(parts) == 0 {
		p := localized[0]
		in.Files[p] = strings.Join(difflib.SplitLines(read[p], false), "\n")
		parts = append(parts, "### "+p+"\n"+in.Files[p])
		in.Omitted = in.Omitted[1:]
	}
	in.Prompt = strings.NewReplacer("{problem_statement}", problem, "{content}", strings.Join(parts, "\n\n")).Replace(repairPrompt)
	return in
}

// RepairRequest is the policy request for the n repair samples that
// start at sample first: one request for all of an instance's samples
// (first 0) is the request Agentless Mini makes.
func RepairRequest(id, prompt string, first, n int, o Options) rollout.Request {
	o.defaults()
	return rollout.Request{InstanceID: id, Prompt: prompt, N: n, MaxTokens: o.MaxTokens, Temperature: o.Temperature, Seed: o.Seed + int64(first)}
}

// RepairCandidate applies repair sample s's answer to the shown files and
// normalizes the patch; the candidate says why it was dropped, if it was.
// It also returns the time spent applying and normalizing. eng is shared
// by an instance's samples (Memoize).
func RepairCandidate(id string, s int, answer string, files map[string]string, eng Engine) (c Candidate, apply, normalize time.Duration) {
	t0 := time.Now()
	r, perr := safeApply(answer, files, eng.Parses)
	apply = time.Since(t0)
	t0 = time.Now()
	c = Candidate{InstanceID: id, Stage: "repair", Sample: s, RawPatch: r.RawModelPatch, ModelPatch: r.ModelPatch, Dropped: r.Dropped, Failures: -1}
	if perr != nil {
		c.Dropped = perr.Error()
	}
	if r.ModelPatch == "" && c.Dropped == "" {
		c.Dropped = DropNoEdit
	}
	if r.ModelPatch != "" {
		norm, err := NormalizePatch(r.ModelPatch, r.Originals, r.NewContents, r.EditedFiles, eng)
		if err != nil {
			c.Dropped = "normalize: " + err.Error()
		} else {
			c.Normalized = norm
		}
	}
	return c, apply, time.Since(t0)
}

// Decide votes over an instance's candidates, in sample order: it sets
// each one's Votes (and Failures, with an executor, which runs the tests
// of every candidate with a non-empty normalized patch at commit), marks
// the chosen one and returns its index, -1 when none has a patch.
func Decide(ctx context.Context, commit string, cands []Candidate, exec Executor) int {
	normalized := make([]string, len(cands))
	votes := map[string]int{}
	for i, c := range cands {
		normalized[i] = c.Normalized
		if k := pyStrip(c.Normalized); k != "" {
			votes[k]++
		}
	}
	for i := range cands {
		cands[i].Votes = votes[pyStrip(cands[i].Normalized)]
	}
	best := -1
	if exec != nil {
		failures := make([]int, len(cands))
		for i := range cands {
			c := &cands[i]
			if pyStrip(c.Normalized) == "" {
				continue
			}
			n, err := exec.Failures(ctx, commit, c.ModelPatch)
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
		cands[best].Chosen = true
	}
	return best
}

// Solve runs Agentless Mini on one instance: localize, repair, normalize,
// vote, one stage after the other (pipelines/agentless runs the same
// stages as Beam transforms). The policy's errors end it; malformed
// answers are counted and dropped.
func Solve(ctx context.Context, pol rollout.Policy, in Instance, o Options) (Outcome, error) {
	o.defaults()
	start := time.Now()
	out := Outcome{Prediction: Prediction{InstanceID: in.ID, Model: o.Model}}
	all := make([]string, 0, len(in.Files))
	for p := range in.Files {
		all = append(all, p)
	}
	paths := LocalizablePaths(all)
	exists := map[string]bool{}
	for _, p := range paths {
		exists[p] = true
	}

	// Localize: one request a sample, each with its own presentation.
	stage := time.Now()
	var ranked [][]string
	for s, prompt := range LocalizePrompts(in.ID, in.Problem, paths, o) {
		t0 := time.Now()
		resp, err := pol.Complete(ctx, LocalizeRequest(in.ID, prompt, s, o))
		out.PolicyTime += time.Since(t0)
		if err != nil {
			return out, fmt.Errorf("agentless: %s: localize: %w", in.ID, err)
		}
		var answers []string
		for _, c := range resp.Completions {
			answers = append(answers, c.Text)
		}
		found := ParseLocalization(answers, exists)
		if len(found) == 0 {
			out.MalformedLocalizations++
		}
		ranked = append(ranked, found)
	}
	out.Stages.Localize = time.Since(stage)
	out.Localized = MergeLocalizations(ranked, o.MaxFiles)
	if len(out.Localized) == 0 {
		out.Time = time.Since(start)
		return out, nil
	}

	// Repair: the localized files' contents within the token budget.
	rep := BuildRepair(in.Problem, out.Localized, in.Files, o)
	out.Omitted = rep.Omitted
	t0 := time.Now()
	resp, err := pol.Complete(ctx, RepairRequest(in.ID, rep.Prompt, 0, o.RepairSamples, o))
	out.PolicyTime += time.Since(t0)
	if err != nil {
		return out, fmt.Errorf("agentless: %s: repair: %w", in.ID, err)
	}
	out.Stages.Repair = time.Since(t0)
	eng := Memoize(DefaultEngine()) // the samples share the original files
	for i, c := range resp.Completions {
		cand, apply, norm := RepairCandidate(in.ID, i, c.Text, rep.Files, eng)
		out.Stages.Apply += apply
		out.Stages.Normalize += norm
		out.Candidates = append(out.Candidates, cand)
	}

	// Vote.
	stage = time.Now()
	if best := Decide(ctx, in.Commit, out.Candidates, o.Executor); best >= 0 {
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
