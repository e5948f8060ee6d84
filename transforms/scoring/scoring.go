// Package scoring is the one path from an instance and a policy's answers to
// scored samples. The train pipeline (pipelines/train), swerl run's local
// rollouts (pipelines/rl) and evaluation (pipelines/eval) all go through it,
// so they share one rule for group ids, sampling seeds, sample ids and the
// schema version written:
//
//   - a group's id is GroupID(prefix, instance id, request): the prefix names
//     the round or rerun, the request index which request of that instance
//     it answers within them (the instance's place in the round's list, or in
//     the file it came from). It does not depend on where a broker stored
//     the request, so a round read again after a crash makes the same ids;
//   - its sampling seed is rollout.GroupSeed(run seed, group id), so a group
//     draws the same completions wherever and whenever it runs;
//   - its samples are "<group id>/<index>", 0 ≤ index < group size, written
//     at schemas.Version;
//   - each answer is scored with the SWE-RL search/replace reward against the
//     files the prompt showed (reward.Task: the oracle's diff is made once a
//     group).
//
// Advantages are not set here: they need the whole group, which the train
// pipeline may assemble from parts (transforms/advantage).
package scoring

import (
	"context"
	"strconv"
	"strings"
	"time"

	"swerl/schemas"
	"swerl/transforms/prompt"
	"swerl/transforms/reward"
	"swerl/transforms/rollout"
)

// Spec is how the groups of a run are asked for.
type Spec struct {
	Prompt      prompt.Options
	GroupSize   int // completions per instance
	MaxTokens   int // longest completion; 0: the policy's default
	Temperature float64
	// Greedy asks for greedy decoding (rollout.Request.Greedy): an
	// evaluation's single answer.
	Greedy bool
	// Seed is the run's sampling seed; 0 asks for no seed.
	Seed int64
}

// GroupID is the id of the group answering request number request
// (0-based) of instance instanceID under prefix: "PREFIX<id>@<request>".
func GroupID(prefix, instanceID string, request int) string {
	return prefix + instanceID + "@" + strconv.Itoa(request)
}

// Group is one instance's group before the policy answers: its id, the
// prompt shown and the request that asks for its completions.
type Group struct {
	ID      string
	Prompt  prompt.Prompt
	Request rollout.Request
	// Oracle is the instance's oracle new contents (reward input, with the
	// files the prompt shows).
	Oracle map[string]string
}

// Task returns the scorer of the group's answers. The train pipeline,
// whose reward stage runs after the group crossed a stage boundary, makes
// its own from the same inputs.
func (g *Group) Task() *reward.Task { return reward.NewTask(g.Prompt.Files, g.Oracle) }

// Prepare builds the prompt of instance in and the policy request of its
// group gid. It fails when the prompt cannot be built (prompt.ErrNoRoom).
func (s Spec) Prepare(in *schemas.Instance, gid string) (Group, error) {
	p, err := prompt.Build(in, s.Prompt)
	if err != nil {
		return Group{}, err
	}
	return Group{ID: gid, Prompt: p, Oracle: in.OracleNewContent,
		Request: rollout.Request{InstanceID: in.ID, System: p.System, Prompt: p.User, N: s.GroupSize,
			MaxTokens: s.MaxTokens, Temperature: s.Temperature, Greedy: s.Greedy, Seed: rollout.GroupSeed(s.Seed, gid)}}, nil
}

// Samples turns the policy's response into the group's GroupSize samples,
// unscored, and says how many of them hold a completion: those past
// len(resp.Completions) carry only their ids (the caller decides whether
// the group goes on incomplete). latencyMS is used when the response does
// not report one; created is the samples' created_at (RFC 3339).
func (s Spec) Samples(in *schemas.Instance, g *Group, resp rollout.Response, latencyMS int64, created string) ([]schemas.Sample, int) {
	if resp.LatencyMS != 0 {
		latencyMS = resp.LatencyMS
	}
	out := make([]schemas.Sample, s.GroupSize)
	got := min(len(resp.Completions), s.GroupSize)
	for i := range out {
		sm := &out[i]
		sm.Rollout = schemas.Rollout{SchemaVersion: schemas.Version, ID: SampleID(g.ID, i), InstanceID: in.ID,
			GroupID: g.ID, GroupSize: s.GroupSize, Index: i, PolicyVersion: resp.PolicyVersion,
			System: g.Prompt.System, Prompt: g.Prompt.User, LatencyMS: latencyMS, CreatedAt: created, Temperature: g.Request.Temperature}
		sm.Repo = in.Repo
		if i < got {
			c := resp.Completions[i]
			sm.Completion, sm.CompletionTokens, sm.PromptTokens = c.Text, c.Tokens, c.PromptTokens
			sm.LogProbs, sm.FinishReason, sm.LogProbsProcessed = c.LogProbs, c.FinishReason, c.LogProbsProcessed
		}
	}
	return out, got
}

// SampleID is the id of member index of group gid.
func SampleID(gid string, index int) string {
	return gid + "/" + strconv.Itoa(index)
}

// Score scores sample sm's completion with task, within timeout (0: no
// cap), and sets its reward, format error and similarities. It returns
// false, setting nothing, when the scoring ran out of time or was
// canceled: that is no score, and the caller dead-letters the sample.
func Score(ctx context.Context, task *reward.Task, sm *schemas.Sample, timeout time.Duration) (reward.Result, bool) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	r := task.Score(ctx, sm.Completion)
	if Unscored(r) {
		return r, false
	}
	sm.Reward, sm.FormatError, sm.Similarities = r.Reward, r.Error, r.Similarities
	return r, true
}

// Unscored reports whether a reward result is no score but a timeout or a
// cancellation.
func Unscored(r reward.Result) bool {
	return strings.HasPrefix(r.Error, "timeout:") || strings.HasPrefix(r.Error, "canceled:")
}
