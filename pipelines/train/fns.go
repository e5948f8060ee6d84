package train

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"swerl/schemas"
	"swerl/transforms/advantage"
	"swerl/transforms/prompt"
	"swerl/transforms/reward"
	"swerl/transforms/rollout"
)

// Record is one raw input record: a line of a JSONL file, a row of a
// Parquet file, or a Kafka message.
type Record struct {
	Source string // position: "FILE:LINE", "FILE#ROW", "topic@partition:offset"
	Key    string
	Value  []byte
}

// member is one rollout of a group on its way to the group stage, or a
// tombstone (Lost != "") for a rollout that was lost on the way.
type member struct {
	Sample schemas.Sample    `json:"sample"`
	Files  map[string]string `json:"files,omitempty"`  // code context shown (reward input)
	Oracle map[string]string `json:"oracle,omitempty"` // oracle new content (reward input)
	Lost   string            `json:"lost,omitempty"`
	// Origin is the input record's position (Record.Source), acknowledged
	// once the group's samples are durable.
	Origin string `json:"origin,omitempty"`
}

// JSON coders of the pipeline's element types (distinct named functions:
// Beam's function registry cannot tell instantiations of a generic apart).
func encodeInstance(v schemas.Instance) ([]byte, error)     { return json.Marshal(&v) }
func encodeMember(v member) ([]byte, error)                 { return json.Marshal(&v) }
func encodeSample(v schemas.Sample) ([]byte, error)         { return json.Marshal(&v) }
func encodeDeadLetter(v schemas.DeadLetter) ([]byte, error) { return json.Marshal(&v) }
func decodeInstance(b []byte) (schemas.Instance, error) {
	var v schemas.Instance
	err := json.Unmarshal(b, &v)
	return v, err
}
func decodeMember(b []byte) (member, error) {
	var v member
	err := json.Unmarshal(b, &v)
	return v, err
}
func decodeSample(b []byte) (schemas.Sample, error) {
	var v schemas.Sample
	err := json.Unmarshal(b, &v)
	return v, err
}
func decodeDeadLetter(b []byte) (schemas.DeadLetter, error) {
	var v schemas.DeadLetter
	err := json.Unmarshal(b, &v)
	return v, err
}

func init() {
	beam.RegisterType(reflect.TypeOf(Record{}))
	beam.RegisterCoder(reflect.TypeOf(schemas.Instance{}), encodeInstance, decodeInstance)
	beam.RegisterCoder(reflect.TypeOf(member{}), encodeMember, decodeMember)
	beam.RegisterCoder(reflect.TypeOf(schemas.Sample{}), encodeSample, decodeSample)
	beam.RegisterCoder(reflect.TypeOf(schemas.DeadLetter{}), encodeDeadLetter, decodeDeadLetter)

	register.DoFn3x0[Record, func(string, schemas.Instance), func(schemas.DeadLetter)](&decodeFn{})
	register.DoFn5x0[context.Context, string, schemas.Instance, func(member), func(schemas.DeadLetter)](&rolloutFn{})
	register.DoFn4x0[context.Context, member, func(string, member), func(schemas.DeadLetter)](&rewardFn{})
	register.DoFn8x0[beam.Window, beam.EventTime, state.Provider, timers.Provider, string, member, func(string, schemas.Sample), func(string)](&groupFn{})
	register.Emitter2[string, schemas.Instance]()
	register.Emitter1[schemas.DeadLetter]()
	register.Emitter1[member]()
	register.Emitter2[string, member]()
	register.Emitter2[string, schemas.Sample]()
	register.Emitter1[string]()
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// deadLetter builds a dead-letter record and counts it.
func deadLetter(st *stats, stage, source, key, reason string, value []byte) schemas.DeadLetter {
	st.dead.Add(1)
	mDeadLetters.WithLabelValues(stage).Inc()
	return schemas.DeadLetter{SchemaVersion: schemas.Version, Stage: stage, Source: source, Key: key,
		Reason: reason, Value: value, CreatedAt: now()}
}

// decodeFn parses an input record into an Instance keyed by its source
// position; a record that does not decode or validate is dead-lettered.
type decodeFn struct {
	RunID string
	st    *stats
}

func (f *decodeFn) Setup() { f.st = runStats(f.RunID) }

func (f *decodeFn) ProcessElement(r Record, emit func(string, schemas.Instance), dead func(schemas.DeadLetter)) {
	f.st.records.Add(1)
	mRecords.Inc()
	var in schemas.Instance
	err := schemas.Decode(r.Value, &in)
	if err == nil {
		err = in.Validate()
	}
	if err != nil {
		dead(deadLetter(f.st, "decode", r.Source, r.Key, fmt.Sprintf("%s: %v", r.Source, err), r.Value))
		return
	}
	emit(r.Source, in)
}

// rolloutFn builds the prompt of an instance and asks the policy for its G
// completions; each becomes a member of the instance's group.
type rolloutFn struct {
	RunID       string
	Policy      string
	GroupSize   int
	GroupPrefix string
	Prompt      prompt.Options
	Temperature float64
	MaxTokens   int
	Seed        int64
	Concurrency int

	st     *stats
	policy rollout.Policy
	own    bool // this DoFn opened policy (remote worker) and closes it
	sem    chan struct{}
}

var semaphores = struct {
	m map[string]chan struct{}
}{m: map[string]chan struct{}{}}

func (f *rolloutFn) Setup() error {
	f.st = runStats(f.RunID)
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	if f.st.policy == nil {
		p, err := rollout.Open(f.Policy)
		if err != nil {
			return err
		}
		f.st.policy, f.own = p, true
	}
	f.policy = f.st.policy
	runsMu.Lock()
	if semaphores.m[f.RunID] == nil {
		semaphores.m[f.RunID] = make(chan struct{}, max(f.Concurrency, 1))
	}
	f.sem = semaphores.m[f.RunID]
	runsMu.Unlock()
	return nil
}

func (f *rolloutFn) Teardown() error {
	if f.own && f.policy != nil {
		return f.policy.Close()
	}
	return nil
}

// GroupID is the id of the group of the instance read at source.
func GroupID(prefix, instanceID, source string) string {
	return prefix + instanceID + "@" + source
}

func (f *rolloutFn) ProcessElement(ctx context.Context, source string, in schemas.Instance, emit func(member), dead func(schemas.DeadLetter)) {
	p, err := prompt.Build(&in, f.Prompt)
	if err != nil {
		v, _ := json.Marshal(&in)
		dead(deadLetter(f.st, "prompt", source, in.ID, err.Error(), v))
		return
	}
	f.st.instances.Add(1)
	req := rollout.Request{InstanceID: in.ID, System: p.System, Prompt: p.User, N: f.GroupSize,
		MaxTokens: f.MaxTokens, Temperature: f.Temperature, Seed: f.Seed}
	f.sem <- struct{}{}
	start := time.Now()
	resp, err := f.policy.Complete(ctx, req)
	<-f.sem
	if err != nil {
		v, _ := json.Marshal(&in)
		dead(deadLetter(f.st, "rollout", source, in.ID, fmt.Sprintf("instance %s: %v", in.ID, err), v))
		return
	}
	f.st.rollouts.Add(int64(len(resp.Completions)))
	mRollouts.Add(float64(len(resp.Completions)))
	f.st.notePolicyVersion(resp.PolicyVersion, f.policy.Version())
	latency := resp.LatencyMS
	if latency == 0 {
		latency = time.Since(start).Milliseconds()
	}
	gid := GroupID(f.GroupPrefix, in.ID, source)
	created := now()
	for i := range f.GroupSize {
		s := schemas.Sample{Repo: in.Repo, Rollout: schemas.Rollout{SchemaVersion: schemas.Version,
			ID: fmt.Sprintf("%s/%d", gid, i), InstanceID: in.ID, GroupID: gid, GroupSize: f.GroupSize, Index: i,
			PolicyVersion: resp.PolicyVersion, System: p.System, Prompt: p.User, LatencyMS: latency, CreatedAt: created}}
		s.SchemaVersion = schemas.Version
		if i >= len(resp.Completions) {
			emit(member{Sample: s, Origin: source, Lost: fmt.Sprintf("the policy returned %d of %d completions", len(resp.Completions), f.GroupSize)})
			continue
		}
		c := resp.Completions[i]
		s.Completion, s.CompletionTokens, s.PromptTokens, s.LogProbs, s.FinishReason = c.Text, c.Tokens, c.PromptTokens, c.LogProbs, c.FinishReason
		emit(member{Sample: s, Files: p.Files, Oracle: in.OracleNewContent, Origin: source})
	}
}

// rewardFn scores a member with the SWE-RL search/replace reward against
// the files its prompt showed; a completion whose scoring times out is
// dead-lettered and goes on as a tombstone.
type rewardFn struct {
	RunID   string
	Timeout time.Duration
	st      *stats
}

func (f *rewardFn) Setup() { f.st = runStats(f.RunID) }

func (f *rewardFn) ProcessElement(ctx context.Context, m member, emit func(string, member), dead func(schemas.DeadLetter)) {
	gid := m.Sample.GroupID
	if m.Lost == "" {
		rctx, cancel := context.WithTimeout(ctx, f.Timeout)
		res := reward.SearchReplace(rctx, m.Files, m.Oracle, m.Sample.Completion)
		cancel()
		if strings.HasPrefix(res.Error, "timeout:") || strings.HasPrefix(res.Error, "canceled:") {
			v, _ := json.Marshal(&m.Sample)
			dead(deadLetter(f.st, "reward", m.Sample.ID, gid, fmt.Sprintf("sample %s: %s", m.Sample.ID, res.Error), v))
			m.Lost = "reward: " + res.Error
		} else {
			m.Sample.Reward, m.Sample.FormatError, m.Sample.Similarities = res.Reward, res.Error, res.Similarities
			f.st.scored.Add(1)
			mReward.Observe(res.Reward)
			if res.Error != "" {
				f.st.formatErrors.Add(1)
				mFormatErrors.Inc()
			}
		}
	}
	m.Files, m.Oracle = nil, nil
	emit(gid, m)
}

// groupFn collects the members of a group (keyed by group id) and, when all
// GroupSize are accounted for or its timeout fires, computes the advantages
// and emits the samples.
//
// The timeout is an event-time timer at the first member's timestamp plus
// TimeoutMS: with a Kafka source the watermark follows the message times, so
// it fires about GroupTimeout after the group's instance was published; at
// the end of bounded input the watermark reaches the end of time and fires
// every pending timeout. (Prism v2.77 does not wake on real time, so a
// processing-time timer would keep a bounded pipeline from finishing.)
type groupFn struct {
	RunID            string
	GroupSize        int
	Method           string
	DropZeroVariance bool
	DropIncomplete   bool
	TimeoutMS        int64

	Members state.Bag[[]byte]
	Arrived state.Value[int64]
	Timeout timers.EventTime

	st *stats
}

func (f *groupFn) Setup() { f.st = runStats(f.RunID) }

func (f *groupFn) ProcessElement(w beam.Window, ts beam.EventTime, sp state.Provider, tp timers.Provider, gid string, m member, emit func(string, schemas.Sample), dropped func(string)) {
	n, _, err := f.Arrived.Read(sp)
	if err != nil {
		panic(fmt.Errorf("train: group %s: read state: %w", gid, err))
	}
	b, err := json.Marshal(&m)
	if err != nil {
		panic(fmt.Errorf("train: group %s: %w", gid, err))
	}
	if err := f.Members.Add(sp, b); err != nil {
		panic(fmt.Errorf("train: group %s: write state: %w", gid, err))
	}
	n++
	if n >= int64(f.GroupSize) {
		f.finish(sp, tp, gid, emit, dropped)
		return
	}
	if err := f.Arrived.Write(sp, n); err != nil {
		panic(fmt.Errorf("train: group %s: write state: %w", gid, err))
	}
	if n == 1 {
		at := ts.Add(time.Duration(f.TimeoutMS) * time.Millisecond)
		if end := w.MaxTimestamp(); at > end || at < ts {
			at = end
		}
		f.Timeout.Set(tp, at.ToTime())
	}
}

func (f *groupFn) OnTimer(ctx context.Context, ts beam.EventTime, sp state.Provider, tp timers.Provider, gid string, timer timers.Context, emit func(string, schemas.Sample), dropped func(string)) {
	f.finish(sp, tp, gid, emit, dropped)
}

// finish emits the group's samples keyed by the origin of its input record,
// or, when the group is dropped, only that origin on dropped (nothing of it
// needs to become durable before the input is acknowledged).
func (f *groupFn) finish(sp state.Provider, tp timers.Provider, gid string, emit func(string, schemas.Sample), dropped func(string)) {
	raw, _, err := f.Members.Read(sp)
	if err != nil {
		panic(fmt.Errorf("train: group %s: read state: %w", gid, err))
	}
	f.Members.Clear(sp)
	f.Arrived.Clear(sp)
	f.Timeout.Clear(tp)
	if len(raw) == 0 {
		return
	}
	seen := map[int]bool{}
	var samples []schemas.Sample
	lost := 0
	origin := ""
	for _, b := range raw {
		var m member
		if err := json.Unmarshal(b, &m); err != nil {
			panic(fmt.Errorf("train: group %s: state: %w", gid, err))
		}
		if seen[m.Sample.Index] { // a replayed member
			continue
		}
		seen[m.Sample.Index] = true
		origin = m.Origin
		if m.Lost != "" {
			lost++
			continue
		}
		samples = append(samples, m.Sample)
	}
	complete := lost == 0 && len(samples) == f.GroupSize
	f.st.groups.Add(1)
	if !complete {
		f.st.incomplete.Add(1)
		mGroups.WithLabelValues("incomplete").Inc()
		if f.DropIncomplete || len(samples) == 0 {
			f.st.dropped.Add(1)
			mGroups.WithLabelValues("dropped").Inc()
			dropped(origin)
			return
		}
	} else {
		mGroups.WithLabelValues("complete").Inc()
	}
	zero, err := advantage.Group(advantage.Method(f.Method), samples, complete)
	if err != nil {
		panic(fmt.Errorf("train: group %s: %w", gid, err))
	}
	if zero {
		f.st.zeroVar.Add(1)
		mGroups.WithLabelValues("zero_variance").Inc()
		if f.DropZeroVariance {
			f.st.dropped.Add(1)
			mGroups.WithLabelValues("dropped").Inc()
			dropped(origin)
			return
		}
	}
	for _, s := range samples {
		emit(origin, s)
	}
}
