// Package reward computes the SWE-RL reward with the exact semantics of the
// reference implementation (src/swerl/core/reward.py): the search/replace
// reward used in the paper, and the unified-diff variant.
//
// A model answer must hold <think>…</think> and <solution>…</solution>, each
// tag exactly once, a non-empty thought, and at least one fenced
// SEARCH/REPLACE block. The edits are applied to the code context in order
// (replace-all, on a text anchored by a leading newline), each changed file
// is turned into a normalized unified diff (Python's splitlines, difflib's
// line matcher with autojunk, 3 lines of context, header lines dropped) and
// compared with the oracle's diff of the same file by difflib's ratio on
// Unicode code points. The reward is the mean over the union of changed
// files, 1.0 when neither side changes anything, and −1 on any format error.
package reward

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"sort"
	"strings"

	"swerl/internal/difflib"
	"swerl/internal/unidiff"
)

// Tags of the answer format.
const (
	ThinkStart  = "<think>"
	ThinkEnd    = "</think>"
	AnswerStart = "<solution>"
	AnswerEnd   = "</solution>"
)

// SearchReplacePattern is the reference's SEARCH_REPLACE_REGEX. Go's RE2
// gives the same leftmost-first matches for it as Python's re.
const SearchReplacePattern = "```.*?\\n### (.*)\\n<<<<<<< SEARCH\\n([\\s\\S]*?)\\n=======\\n([\\s\\S]*?)\\n>>>>>>> REPLACE\\n```"

var searchReplaceRE = regexp.MustCompile(SearchReplacePattern)

// Result is the outcome of scoring one answer.
type Result struct {
	Reward       float64
	Error        string             // why it scored −1 ("" when well-formed)
	Similarities map[string]float64 // per file, when well-formed
}

// Edit is one SEARCH/REPLACE block.
type Edit struct {
	Path    string
	Search  string
	Replace string
}

// FormatError is a malformed answer; it scores −1.
type FormatError struct{ Msg string }

func (e *FormatError) Error() string { return e.Msg }

func formatErrorf(format string, a ...any) error { return &FormatError{fmt.Sprintf(format, a...)} }

// ExtractThoughtSolution is the reference's extract_thought_solution: each
// tag exactly once (their order is not checked), the stripped text after
// <think> up to </think> must be non-empty; the answer may be empty.
func ExtractThoughtSolution(output string) (thought, answer string, err error) {
	for _, tag := range []string{ThinkStart, ThinkEnd, AnswerStart, AnswerEnd} {
		if strings.Count(output, tag) != 1 {
			return "", "", formatErrorf("count of %s is not 1", tag)
		}
	}
	between := func(start, end string) string {
		s := output[strings.Index(output, start)+len(start):]
		if i := strings.Index(s, end); i >= 0 {
			s = s[:i]
		}
		return unidiff.PyStrip(s)
	}
	thought = between(ThinkStart, ThinkEnd)
	answer = between(AnswerStart, AnswerEnd)
	if thought == "" {
		return "", "", formatErrorf("Thought is empty")
	}
	return thought, answer, nil
}

// ParseSearchReplace is the reference's parse_search_replace: every block of
// text in order (duplicates kept).
func ParseSearchReplace(text string) []Edit {
	ms := searchReplaceRE.FindAllStringSubmatch(text, -1)
	edits := make([]Edit, len(ms))
	for i, m := range ms {
		edits[i] = Edit{Path: m[1], Search: m[2], Replace: m[3]}
	}
	return edits
}

// ParseAnswer extracts the search/replace edits from an answer (errors name
// the problem).
func ParseAnswer(output string) ([]Edit, error) {
	_, answer, err := ExtractThoughtSolution(output)
	if err != nil {
		return nil, err
	}
	edits := ParseSearchReplace(answer)
	if len(edits) == 0 {
		return nil, formatErrorf("No valid search blocks found")
	}
	return edits, nil
}

// ApplyEdits is the reference's apply_code_change: for each path (in order
// of first appearance) the edits apply in order to "\n"+content (a missing
// file is empty), each replacing every occurrence of "\n"+search with
// "\n"+replace; a search equal to its replace, or not found, is an error.
func ApplyEdits(codeContext map[string]string, edits []Edit) (map[string]string, error) {
	var order []string
	byPath := map[string][]Edit{}
	for _, e := range edits {
		if _, ok := byPath[e.Path]; !ok {
			order = append(order, e.Path)
		}
		byPath[e.Path] = append(byPath[e.Path], e)
	}
	out := make(map[string]string, len(order))
	for _, path := range order {
		content := "\n" + codeContext[path]
		for _, e := range byPath[path] {
			if e.Search == e.Replace {
				return nil, formatErrorf("Search and replace blocks are identical")
			}
			search, replace := "\n"+e.Search, "\n"+e.Replace
			if !strings.Contains(content, search) {
				return nil, formatErrorf("Search block not found in the code: %s", search)
			}
			content = strings.ReplaceAll(content, search, replace)
		}
		out[path] = content[1:]
	}
	return out, nil
}

// ApplyAnswer applies an answer's edits to the code context and returns the
// changed files' new contents (same semantics the reward uses).
func ApplyAnswer(codeContext map[string]string, output string) (map[string]string, error) {
	edits, err := ParseAnswer(output)
	if err != nil {
		return nil, err
	}
	return ApplyEdits(codeContext, edits)
}

// NormalizedPatch is the reference's get_normalized_patch: for each path of
// newContent, the normalized diff against codeContext (missing = empty),
// kept when non-empty.
func NormalizedPatch(ctx context.Context, codeContext, newContent map[string]string) (map[string]string, error) {
	return normalizedPatch(ctx, codeContext, newContent, nil, nil)
}

// normalizedPatch is NormalizedPatch that takes the diff of a path from
// known (a NormalizedPatch of knownNew against the same code context) when
// newContent has the same text for it as knownNew: a right answer's files
// equal the oracle's, and their diffs need not be computed twice.
func normalizedPatch(ctx context.Context, codeContext, newContent, knownNew, known map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(newContent))
	for path, nc := range newContent {
		if kn, ok := knownNew[path]; ok && kn == nc {
			if d, ok := known[path]; ok {
				out[path] = d
			}
			continue
		}
		d, err := difflib.DiffBody(ctx, codeContext[path], nc)
		if err != nil {
			return nil, err
		}
		if d != "" {
			out[path] = d
		}
	}
	return out, nil
}

// Similarity is difflib.SequenceMatcher(None, pred, oracle,
// autojunk=False).ratio() on Unicode code points.
//
// Equal texts score 1.0 without a matcher (the ratio of equal sequences,
// empty ones included, is exactly 1.0).
func Similarity(ctx context.Context, pred, oracle string) (float64, error) {
	if pred == oracle {
		return 1, nil
	}
	m := difflib.NewRunes(pred, oracle, false)
	defer m.Release()
	m.SetContext(ctx)
	r := m.Ratio()
	return r, m.Err()
}

// ChangeSimilarities is the reference's compute_change_similarities over the
// union of paths: 0 when either side has no change, else Similarity.
func ChangeSimilarities(ctx context.Context, pred, oracle map[string]string) (map[string]float64, error) {
	out := make(map[string]float64, len(pred)+len(oracle))
	for _, m := range []map[string]string{oracle, pred} {
		for path := range m {
			if _, done := out[path]; done {
				continue
			}
			p, o := pred[path], oracle[path]
			if p == "" || o == "" {
				out[path] = 0
				continue
			}
			s, err := Similarity(ctx, p, o)
			if err != nil {
				return nil, err
			}
			out[path] = s
		}
	}
	return out, nil
}

// mean is the reward from per-file similarities: their mean in path order,
// 1.0 when there are none.
func mean(sims map[string]float64) float64 {
	if len(sims) == 0 {
		return 1.0
	}
	paths := make([]string, 0, len(sims))
	for p := range sims {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	sum := 0.0
	for _, p := range paths {
		sum += sims[p]
	}
	return sum / float64(len(sims))
}

func timeoutResult(err error) Result {
	if errors.Is(err, context.DeadlineExceeded) {
		return Result{Reward: -1, Error: "timeout: similarity computation exceeded the time limit"}
	}
	return Result{Reward: -1, Error: "canceled: " + err.Error()}
}

// Compare is the reference's calculate_reward: the mean similarity of the
// normalized per-file diffs of predNew and oracleNew against codeContext.
func Compare(ctx context.Context, codeContext, oracleNew, predNew map[string]string) Result {
	oracle, err := NormalizedPatch(ctx, codeContext, oracleNew)
	if err != nil {
		return timeoutResult(err)
	}
	return compareTo(ctx, codeContext, oracleNew, oracle, predNew)
}

// compareTo is Compare with the oracle's normalized patch given.
func compareTo(ctx context.Context, codeContext, oracleNew, oracle, predNew map[string]string) Result {
	pred, err := normalizedPatch(ctx, codeContext, predNew, oracleNew, oracle)
	if err != nil {
		return timeoutResult(err)
	}
	sims, err := ChangeSimilarities(ctx, pred, oracle)
	if err != nil {
		return timeoutResult(err)
	}
	return Result{Reward: mean(sims), Similarities: sims}
}

// SearchReplace scores a model answer (thought + search/replace blocks)
// against the oracle. ctx bounds the work: on expiry the Result has Reward
// −1 and Error naming the timeout.
func SearchReplace(ctx context.Context, codeContext, oracleNewContent map[string]string, output string) Result {
	if err := ctx.Err(); err != nil {
		return timeoutResult(err)
	}
	pred, err := ApplyAnswer(codeContext, output)
	if err != nil {
		return Result{Reward: -1, Error: err.Error()}
	}
	return Compare(ctx, codeContext, oracleNewContent, pred)
}

// Task scores many answers to one instance with SearchReplace's result:
// the oracle's normalized patch is computed once (on the first answer that
// gets that far) instead of once an answer, and an answer equal to one
// already scored gets that score again. The G rollouts of a GRPO group
// share a Task; sampled groups repeat answers often. Not safe for
// concurrent use.
type Task struct {
	codeContext, oracleNew map[string]string
	oracle                 map[string]string // nil until computed
	memo                   map[string]Result
}

// NewTask prepares the scoring of answers against one instance's oracle.
func NewTask(codeContext, oracleNewContent map[string]string) *Task {
	return &Task{codeContext: codeContext, oracleNew: oracleNewContent}
}

// Score is SearchReplace(ctx, codeContext, oracleNewContent, output). A
// timeout is not remembered: a later call with more time computes again.
func (t *Task) Score(ctx context.Context, output string) Result {
	if r, ok := t.memo[output]; ok {
		r.Similarities = maps.Clone(r.Similarities)
		return r
	}
	if err := ctx.Err(); err != nil {
		return timeoutResult(err)
	}
	var r Result
	if pred, err := ApplyAnswer(t.codeContext, output); err != nil {
		r = Result{Reward: -1, Error: err.Error()}
	} else {
		if t.oracle == nil {
			oracle, err := NormalizedPatch(ctx, t.codeContext, t.oracleNew)
			if err != nil {
				return timeoutResult(err)
			}
			t.oracle = oracle
		}
		if r = compareTo(ctx, t.codeContext, t.oracleNew, t.oracle, pred); r.Error != "" {
			return r // only a timeout sets Error here
		}
	}
	if t.memo == nil {
		t.memo = map[string]Result{}
	}
	t.memo[output] = r
	r.Similarities = maps.Clone(r.Similarities)
	return r
}

// Unidiff scores predicted git-style patches against the oracle patches
// (the reference's calculate_reward_unidiff): per-file normalized diffs,
// the last diff touching a path wins, unparseable patches contribute
// nothing, and both sides empty score 1.0. It has no −1 path except a
// timeout.
func Unidiff(ctx context.Context, oraclePatches, predPatches []string) Result {
	merge := func(patches []string) map[string]string {
		out := map[string]string{}
		for _, p := range patches {
			fl, _ := unidiff.FileLevel(p)
			for k, v := range fl {
				out[k] = v
			}
		}
		return out
	}
	oracle, pred := merge(oraclePatches), merge(predPatches)
	sims, err := ChangeSimilarities(ctx, pred, oracle)
	if err != nil {
		return timeoutResult(err)
	}
	return Result{Reward: mean(sims), Similarities: sims}
}
