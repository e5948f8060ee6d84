package scoring

import (
	"context"
	"fmt"
	"math"
	"testing"

	"swerl/schemas"
	"swerl/transforms/prompt"
	"swerl/transforms/reward"
	"swerl/transforms/rollout"
)

func instance() schemas.Instance {
	return schemas.Instance{SchemaVersion: schemas.Version, ID: "o/r#7", Repo: "o/r", ProblemStatement: "F returns the wrong value",
		CodeContext:      map[string]string{"f.go": "package f\n\nfunc F() int {\n\treturn 1\n}\n"},
		OracleNewContent: map[string]string{"f.go": "package f\n\nfunc F() int {\n\treturn 2\n}\n"}}
}

func TestPrepareAndSamples(t *testing.T) {
	in := instance()
	spec := Spec{Prompt: prompt.Options{Compact: true}, GroupSize: 3, MaxTokens: 50, Temperature: 0.7, Seed: 11}
	gid := GroupID("r000002/", in.ID, 4)
	if gid != "r000002/o/r#7@4" {
		t.Fatalf("group id %q", gid)
	}
	g, err := spec.Prepare(&in, gid)
	if err != nil {
		t.Fatal(err)
	}
	p, err := prompt.Build(&in, spec.Prompt)
	if err != nil {
		t.Fatal(err)
	}
	want := rollout.Request{InstanceID: in.ID, System: p.System, Prompt: p.User, N: 3, MaxTokens: 50, Temperature: 0.7,
		Seed: rollout.GroupSeed(11, gid)}
	if g.Request != want || g.Request.Seed == 0 {
		t.Fatalf("request %+v, want %+v", g.Request, want)
	}
	resp := rollout.Response{PolicyVersion: 4, Completions: []rollout.Completion{
		{Text: "a", Tokens: []int32{1}, LogProbs: []float32{-0.5}, FinishReason: "stop"}, {Text: "b", FinishReason: "length"}}}
	ss, got := spec.Samples(&in, &g, resp, 12, "2026-01-01T00:00:00Z")
	if got != 2 || len(ss) != 3 {
		t.Fatalf("got %d of %d samples, want 2 of 3", got, len(ss))
	}
	for i, s := range ss {
		if s.ID != fmt.Sprintf("%s/%d", gid, i) || s.Index != i || s.GroupID != gid || s.GroupSize != 3 ||
			s.SchemaVersion != schemas.Version || s.PolicyVersion != 4 || s.InstanceID != in.ID || s.Repo != "o/r" ||
			s.System != p.System || s.Prompt != p.User || s.LatencyMS != 12 || s.CreatedAt != "2026-01-01T00:00:00Z" {
			t.Errorf("sample %d: %+v", i, s.Rollout)
		}
	}
	if ss[0].Completion != "a" || ss[0].FinishReason != "stop" || len(ss[0].LogProbs) != 1 || ss[1].Completion != "b" || ss[2].Completion != "" {
		t.Errorf("completions not carried over: %q %q %q", ss[0].Completion, ss[1].Completion, ss[2].Completion)
	}
	// A response that reports its latency wins over the caller's measure.
	resp.LatencyMS = 99
	if ss, _ := spec.Samples(&in, &g, resp, 12, ""); ss[0].LatencyMS != 99 {
		t.Errorf("latency %d, want the response's 99", ss[0].LatencyMS)
	}
}

func TestScoreIsTheReward(t *testing.T) {
	in := instance()
	spec := Spec{Prompt: prompt.Options{Compact: true}, GroupSize: 2}
	g, err := spec.Prepare(&in, GroupID("", in.ID, 0))
	if err != nil {
		t.Fatal(err)
	}
	oracle, err := prompt.OracleAnswer(&in, g.Prompt.Files)
	if err != nil {
		t.Fatal(err)
	}
	task := g.Task()
	for _, answer := range []string{oracle, "<think>no</think>", oracle[:len(oracle)/2]} {
		s := schemas.Sample{}
		s.Completion = answer
		if _, ok := Score(context.Background(), task, &s, 0); !ok {
			t.Fatalf("%q: not scored", answer)
		}
		want := reward.SearchReplace(context.Background(), g.Prompt.Files, in.OracleNewContent, answer)
		if math.Abs(s.Reward-want.Reward) > 1e-12 || s.FormatError != want.Error {
			t.Errorf("%q: scored %v %q, reward.SearchReplace %v %q", answer, s.Reward, s.FormatError, want.Reward, want.Error)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := schemas.Sample{}
	s.Completion, s.Reward = "<think>x</think>", 0.5
	if r, ok := Score(ctx, reward.NewTask(g.Prompt.Files, in.OracleNewContent), &s, 0); ok || !Unscored(r) || s.Reward != 0.5 {
		t.Errorf("canceled scoring: ok %v, result %+v, sample reward %v (want not scored, sample untouched)", ok, r, s.Reward)
	}
}
