package train

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"swerl/pipelines/beamrun"
	"swerl/schemas"
	"swerl/sinks/kafkaio"
	"swerl/sinks/weightsync"
	"swerl/transforms/advantage"
	"swerl/transforms/groups"
	"swerl/transforms/reward"
	"swerl/transforms/rollout"
	"swerl/transforms/scoring"
)

// Record is one raw input record: a line of a JSONL file, a row of a
// Parquet file, or a Kafka message.
type Record struct {
	Source string // position: "FILE:LINE", "FILE#ROW", "topic@partition:offset"
	Key    string
	Value  []byte
	// Request is the record's request index (scoring.GroupID): in a file,
	// its place among the file's records (0-based, blank lines not
	// counted); a Kafka record's comes from its key (RequestKey) when the
	// key names one, else it is 0.
	Request int
}

// RequestKey is the Kafka key Feed gives request number request of
// instance id: "<id>#<request>". Request 0 is keyed by the bare id, as
// `swerl mine` keys what it produces.
func RequestKey(id string, request int) string {
	if request == 0 {
		return id
	}
	return id + "#" + strconv.Itoa(request)
}

// requestIndex is the request index of record r holding instance id: the
// one its key names (RequestKey), else r.Request.
func requestIndex(r *Record, id string) int {
	if rest, ok := strings.CutPrefix(r.Key, id+"#"); ok {
		if n, err := strconv.Atoi(rest); err == nil && n > 0 && strconv.Itoa(n) == rest {
			return n
		}
	}
	return r.Request
}

// request is where an instance was read (Source: acknowledged once its
// group is durable, named by its dead-letters) and its request index.
type request struct {
	Source string
	Index  int
}

// part is some or all of the members of one group on their way to the
// group stage. The policy answers the G completions of an instance in one
// response, so a part normally holds the whole group; the group stage
// merges parts when it does not. Prompt text is carried once per part, not
// once per member.
type part struct {
	GroupID string `json:"group_id"`
	// Origin is the input record's position (Record.Source), acknowledged
	// once the group's samples are durable.
	Origin string            `json:"origin,omitempty"`
	System string            `json:"system,omitempty"`
	Prompt string            `json:"prompt"`
	Files  map[string]string `json:"files,omitempty"`  // code context shown (reward input)
	Oracle map[string]string `json:"oracle,omitempty"` // oracle new content (reward input)
	// Members are the rollouts (System and Prompt left empty) or
	// tombstones.
	Members []member `json:"members"`
}

// member is one rollout of a group, or a tombstone (Lost != "") for a
// rollout that was lost on the way.
type member struct {
	Sample schemas.Sample `json:"sample"`
	Lost   string         `json:"lost,omitempty"`
}

// JSON coders of the pipeline's element types other than part (whose
// binary coder is in partcoder.go); distinct named functions, because
// Beam's function registry cannot tell instantiations of a generic apart.
func encodeInstance(v schemas.Instance) ([]byte, error)     { return json.Marshal(&v) }
func encodeSample(v schemas.Sample) ([]byte, error)         { return json.Marshal(&v) }
func encodeDeadLetter(v schemas.DeadLetter) ([]byte, error) { return json.Marshal(&v) }
func decodeInstance(b []byte) (schemas.Instance, error) {
	var v schemas.Instance
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
	beam.RegisterType(reflect.TypeOf(request{}))
	beam.RegisterCoder(reflect.TypeOf(schemas.Instance{}), encodeInstance, decodeInstance)
	beam.RegisterCoder(reflect.TypeOf(part{}), encodePart, decodePart)
	beam.RegisterCoder(reflect.TypeOf(schemas.Sample{}), encodeSample, decodeSample)
	beam.RegisterCoder(reflect.TypeOf(schemas.DeadLetter{}), encodeDeadLetter, decodeDeadLetter)

	register.DoFn5x0[context.Context, beam.EventTime, Record, func(beam.EventTime, request, schemas.Instance), func(beam.EventTime, schemas.DeadLetter)](&decodeFn{})
	register.DoFn6x0[context.Context, beam.EventTime, request, schemas.Instance, func(beam.EventTime, part), func(beam.EventTime, schemas.DeadLetter)](&rolloutFn{})
	register.DoFn6x0[context.Context, beam.EventTime, part, func(beam.EventTime, part), func(beam.EventTime, string, part), func(beam.EventTime, schemas.DeadLetter)](&rewardFn{})
	register.DoFn4x0[context.Context, part, func(string, schemas.Sample), func(string)](&wholeGroupFn{})
	register.DoFn9x0[context.Context, beam.Window, beam.EventTime, state.Provider, timers.Provider, string, part, func(string, schemas.Sample), func(string)](&groupFn{})
	register.Emitter3[beam.EventTime, request, schemas.Instance]()
	register.Emitter3[beam.EventTime, string, part]()
	register.Emitter1[schemas.DeadLetter]()
	register.Emitter2[beam.EventTime, part]()
	register.Emitter2[beam.EventTime, schemas.DeadLetter]()
	register.Emitter2[string, part]()
	register.Emitter2[beam.EventTime, part]()
	register.Emitter2[string, schemas.Sample]()
	register.Emitter1[string]()
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// deadLetter builds a dead-letter record and counts it in the bundle of
// ctx.
func deadLetter(ctx context.Context, stage, source, key, reason string, value []byte) schemas.DeadLetter {
	cDeadLetters.With(stage).Add(ctx, 1)
	return schemas.DeadLetter{SchemaVersion: schemas.Version, Stage: stage, Source: source, Key: key,
		Reason: reason, Value: value, CreatedAt: now()}
}

// decodeFn parses an input record into an Instance keyed by its source
// position; a record that does not decode or validate is dead-lettered.
// Records decode on up to one goroutine a core (see beamrun.Async).
type decodeFn struct {
	RunID string
	work  *beamrun.Async[decoded]
}

// decoded is the outcome of decoding one record.
type decoded struct {
	req  request
	in   schemas.Instance
	dead *schemas.DeadLetter
}

func (f *decodeFn) Setup() {
	f.work = beamrun.NewAsync[decoded](beamrun.CPUSlots(), nil)
}

func (f *decodeFn) ProcessElement(ctx context.Context, ts beam.EventTime, r Record, emit func(beam.EventTime, request, schemas.Instance), dead func(beam.EventTime, schemas.DeadLetter)) {
	cRecords.Add(ctx, 1)
	f.work.Submit(ts, func() decoded {
		in, err := DecodeRecord(r)
		if err != nil {
			d := deadLetter(ctx, "decode", r.Source, r.Key, err.Error(), r.Value)
			return decoded{dead: &d}
		}
		return decoded{req: request{Source: r.Source, Index: requestIndex(&r, in.ID)}, in: in}
	}, f.out(emit, dead))
}

func (f *decodeFn) FinishBundle(emit func(beam.EventTime, request, schemas.Instance), dead func(beam.EventTime, schemas.DeadLetter)) {
	f.work.Wait(f.out(emit, dead))
}

func (f *decodeFn) out(emit func(beam.EventTime, request, schemas.Instance), dead func(beam.EventTime, schemas.DeadLetter)) func(beam.EventTime, decoded) {
	return func(ts beam.EventTime, d decoded) {
		if d.dead != nil {
			dead(ts, *d.dead)
			return
		}
		emit(ts, d.req, d.in)
	}
}

// DecodeRecord parses an input record as a valid Instance; the error names
// the record's source position.
func DecodeRecord(r Record) (schemas.Instance, error) {
	var in schemas.Instance
	err := schemas.Decode(r.Value, &in)
	if err == nil {
		err = in.Validate()
	}
	if err != nil {
		return schemas.Instance{}, fmt.Errorf("%s: %w", r.Source, err)
	}
	return in, nil
}

// rolloutFn builds the prompt of an instance and asks the policy for its G
// completions, emitted together as one part holding the whole group.
//
// Requests run asynchronously, up to Concurrency at once in this process
// (shared by all of the run's DoFn instances): ProcessElement starts one
// and emits whatever has finished; FinishBundle waits for the rest, so a
// bundle completes only with all of its outputs emitted. Outputs keep the
// event time of their input.
type rolloutFn struct {
	RunID       string
	Policy      string
	Spec        scoring.Spec
	GroupPrefix string
	Concurrency int
	// Weights, when it names brokers, is the cluster whose weights topic
	// a worker that opens its own policy (a remote runner's) reads for the
	// adapters announced on each engine (Config.FollowAnnouncements).
	Weights kafkaio.Config

	st       *stats
	policy   rollout.Policy
	own      bool   // this DoFn opened policy (remote worker) and closes it
	unfollow func() // stops the announcements this DoFn follows for its policy
	ctx      context.Context
	cancel   context.CancelFunc
	work     *beamrun.Async[rolled]
}

// rolled is the outcome of one policy request.
type rolled struct {
	part *part
	dead *schemas.DeadLetter
}

func (f *rolloutFn) Setup() error {
	f.st = runStats(f.RunID)
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	if f.st.policy == nil {
		// A worker of a remote runner: the run's process did not open the
		// policy here, nor follow the weights topic for it.
		var table *weightsync.Table
		if len(f.Weights.Brokers) > 0 {
			table = weightsync.NewTable()
			f.unfollow = followAnnouncements(context.Background(), f.Weights, table, slog.Default())
		}
		p, err := rollout.Open(f.Policy, rollout.WithTable(table))
		if err != nil {
			if f.unfollow != nil {
				f.unfollow()
			}
			return err
		}
		f.st.policy, f.own = p, true
	}
	f.policy = f.st.policy
	if f.st.sem == nil {
		f.st.sem = make(chan struct{}, max(f.Concurrency, 1))
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.work = beamrun.NewAsync[rolled](0, f.st.sem)
	return nil
}

func (f *rolloutFn) Teardown() error {
	if f.cancel != nil {
		f.cancel()
	}
	if f.unfollow != nil {
		f.unfollow()
	}
	if f.own && f.policy != nil {
		return f.policy.Close()
	}
	return nil
}

func (f *rolloutFn) ProcessElement(ctx context.Context, ts beam.EventTime, req request, in schemas.Instance, emit func(beam.EventTime, part), dead func(beam.EventTime, schemas.DeadLetter)) {
	f.work.Submit(ts, func() rolled { return f.complete(ctx, req, &in) }, output(emit, dead))
}

// FinishBundle waits for the bundle's requests still in flight.
func (f *rolloutFn) FinishBundle(emit func(beam.EventTime, part), dead func(beam.EventTime, schemas.DeadLetter)) {
	f.work.Wait(output(emit, dead))
}

func output(emit func(beam.EventTime, part), dead func(beam.EventTime, schemas.DeadLetter)) func(beam.EventTime, rolled) {
	return func(ts beam.EventTime, r rolled) {
		if r.dead != nil {
			dead(ts, *r.dead)
			return
		}
		emit(ts, *r.part)
	}
}

// complete builds the prompt of one instance and asks the policy for its
// group (scoring.Spec: the group id, seed and sample ids); bundle is the
// context of the bundle it counts in.
func (f *rolloutFn) complete(bundle context.Context, req request, in *schemas.Instance) rolled {
	source := req.Source
	g, err := f.Spec.Prepare(in, scoring.GroupID(f.GroupPrefix, in.ID, req.Index))
	if err != nil {
		v, _ := json.Marshal(in)
		d := deadLetter(bundle, "prompt", source, in.ID, err.Error(), v)
		return rolled{dead: &d}
	}
	cInstances.Add(bundle, 1)
	start := time.Now()
	resp, err := f.policy.Complete(f.ctx, g.Request)
	if err != nil {
		v, _ := json.Marshal(in)
		d := deadLetter(bundle, "rollout", source, in.ID, fmt.Sprintf("instance %s: %v", in.ID, err), v)
		return rolled{dead: &d}
	}
	cRollouts.Add(bundle, int64(len(resp.Completions)))
	notePolicyVersion(bundle, resp.PolicyVersion, f.policy.Version())
	samples, got := f.Spec.Samples(in, &g, resp, time.Since(start).Milliseconds(), now())
	// The part carries the prompt text once; its members leave it empty.
	out := part{GroupID: g.ID, Origin: source, System: g.Prompt.System, Prompt: g.Prompt.User, Files: g.Prompt.Files,
		Oracle: in.OracleNewContent, Members: make([]member, len(samples))}
	for i, s := range samples {
		s.System, s.Prompt = "", ""
		out.Members[i] = member{Sample: s}
		if i >= got {
			out.Members[i].Lost = fmt.Sprintf("the policy returned %d of %d completions", len(resp.Completions), f.Spec.GroupSize)
		}
	}
	return rolled{part: &out}
}

// rewardFn scores the members of a part with the SWE-RL search/replace
// reward against the files its prompt showed; a completion whose scoring
// times out is dead-lettered and goes on as a tombstone. A part that holds
// its whole group (every member or its tombstone: what rolloutFn makes)
// goes out on whole, to the stateless wholeGroupFn in the same fused
// stage; any other goes out on partial, keyed by group id, to the stateful
// groupFn that merges the parts of a group.
type rewardFn struct {
	RunID     string
	Timeout   time.Duration
	GroupSize int
	ctx       context.Context
	cancel    context.CancelFunc
	work      *beamrun.Async[scored]
}

// scored is a part whose members have been scored, with the dead-letters
// of the members whose scoring failed.
type scored struct {
	part part
	dead []schemas.DeadLetter
}

func (f *rewardFn) Setup() {
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.work = beamrun.NewAsync[scored](beamrun.CPUSlots(), nil)
}

func (f *rewardFn) Teardown() {
	if f.cancel != nil {
		f.cancel()
	}
}

func (f *rewardFn) ProcessElement(ctx context.Context, ts beam.EventTime, p part, whole func(beam.EventTime, part), partial func(beam.EventTime, string, part), dead func(beam.EventTime, schemas.DeadLetter)) {
	f.work.Submit(ts, func() scored { return f.score(ctx, p) }, f.out(whole, partial, dead))
}

func (f *rewardFn) FinishBundle(whole func(beam.EventTime, part), partial func(beam.EventTime, string, part), dead func(beam.EventTime, schemas.DeadLetter)) {
	f.work.Wait(f.out(whole, partial, dead))
}

func (f *rewardFn) out(whole func(beam.EventTime, part), partial func(beam.EventTime, string, part), dead func(beam.EventTime, schemas.DeadLetter)) func(beam.EventTime, scored) {
	return func(ts beam.EventTime, s scored) {
		for _, d := range s.dead {
			dead(ts, d)
		}
		if len(s.part.Members) >= f.GroupSize {
			whole(ts, s.part)
			return
		}
		partial(ts, s.part.GroupID, s.part)
	}
}

// score scores the members of p; bundle is the context of the bundle it
// counts in.
func (f *rewardFn) score(bundle context.Context, p part) scored {
	var out scored
	task := reward.NewTask(p.Files, p.Oracle) // the group's members share the oracle's diff
	for i := range p.Members {
		m := &p.Members[i]
		if m.Lost != "" {
			continue
		}
		res, ok := scoring.Score(f.ctx, task, &m.Sample, f.Timeout)
		if !ok {
			v, _ := json.Marshal(&m.Sample)
			out.dead = append(out.dead, deadLetter(bundle, "reward", m.Sample.ID, p.GroupID, fmt.Sprintf("sample %s: %s", m.Sample.ID, res.Error), v))
			m.Lost = "reward: " + res.Error
			continue
		}
		cScored.Add(bundle, 1)
		mReward.Observe(res.Reward)
		if res.Error != "" {
			cFormatErrors.Add(bundle, 1)
		}
	}
	p.Files, p.Oracle = nil, nil
	out.part = p
	return out
}

// wholeGroupFn computes the advantages of groups that arrive in one part,
// with no shuffle and no state, so the usual group never crosses the data
// plane to groupFn, whose state reads per key are a round trip to the
// runner each.
type wholeGroupFn struct {
	RunID            string
	GroupSize        int
	Method           string
	DropZeroVariance bool
	DropIncomplete   bool
	rule             groupRule
}

func (f *wholeGroupFn) Setup() {
	f.rule = newGroupRule(f.GroupSize, f.Method, f.DropZeroVariance, f.DropIncomplete)
}

func (f *wholeGroupFn) ProcessElement(ctx context.Context, p part, emit func(string, schemas.Sample), dropped func(string)) {
	f.rule.emitGroup(ctx, []part{p}, p.GroupID, emit, dropped)
}

// groupFn collects the parts of a split group (keyed by group id; whole
// groups never come here, see rewardFn) and, when all GroupSize members are
// accounted for or its timeout fires, computes the advantages and emits the
// samples.
//
// Its pending groups are Beam keyed state, not a transforms/groups
// Assembler in memory: the runner holds them across bundles and workers.
// Arrived counts the members (tombstones and replayed copies too) so that
// an element reads no more state than one value; emitGroup merges the
// parts with an Assembler once the group is done.
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

	rule groupRule
}

func (f *groupFn) Setup() {
	f.rule = newGroupRule(f.GroupSize, f.Method, f.DropZeroVariance, f.DropIncomplete)
}

func (f *groupFn) ProcessElement(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, tp timers.Provider, gid string, p part, emit func(string, schemas.Sample), dropped func(string)) {
	n, _, err := f.Arrived.Read(sp)
	if err != nil {
		panic(fmt.Errorf("train: group %s: read state: %w", gid, err))
	}
	b, err := encodePart(p)
	if err != nil {
		panic(fmt.Errorf("train: group %s: %w", gid, err))
	}
	if err := f.Members.Add(sp, b); err != nil {
		panic(fmt.Errorf("train: group %s: write state: %w", gid, err))
	}
	first := n == 0
	n += int64(len(p.Members))
	if n >= int64(f.GroupSize) {
		f.finish(ctx, sp, tp, gid, emit, dropped)
		return
	}
	if err := f.Arrived.Write(sp, n); err != nil {
		panic(fmt.Errorf("train: group %s: write state: %w", gid, err))
	}
	if first {
		at := ts.Add(time.Duration(f.TimeoutMS) * time.Millisecond)
		if end := w.MaxTimestamp(); at > end || at < ts {
			at = end
		}
		f.Timeout.Set(tp, at.ToTime())
	}
}

func (f *groupFn) OnTimer(ctx context.Context, ts beam.EventTime, sp state.Provider, tp timers.Provider, gid string, timer timers.Context, emit func(string, schemas.Sample), dropped func(string)) {
	f.finish(ctx, sp, tp, gid, emit, dropped)
}

// finish emits the parts collected in state and clears it.
func (f *groupFn) finish(ctx context.Context, sp state.Provider, tp timers.Provider, gid string, emit func(string, schemas.Sample), dropped func(string)) {
	raw, _, err := f.Members.Read(sp)
	if err != nil {
		panic(fmt.Errorf("train: group %s: read state: %w", gid, err))
	}
	f.Members.Clear(sp)
	f.Arrived.Clear(sp)
	f.Timeout.Clear(tp)
	parts := make([]part, 0, len(raw))
	for _, b := range raw {
		p, err := decodePart(b)
		if err != nil {
			panic(fmt.Errorf("train: group %s: state: %w", gid, err))
		}
		parts = append(parts, p)
	}
	if len(parts) > 0 {
		f.rule.emitGroup(ctx, parts, gid, emit, dropped)
	}
}

// groupRule is how a finished group becomes samples, shared by the
// stateless and the stateful group stage.
type groupRule struct {
	groupSize                        int
	method                           string
	dropZeroVariance, dropIncomplete bool
}

func newGroupRule(groupSize int, method string, dropZeroVariance, dropIncomplete bool) groupRule {
	return groupRule{groupSize: groupSize, method: method,
		dropZeroVariance: dropZeroVariance, dropIncomplete: dropIncomplete}
}

// emitGroup computes the advantages of a finished group and emits its
// samples keyed by the origin of its input record, or, when the group is
// dropped, only that origin on dropped (nothing of it needs to become
// durable before the input is acknowledged).
func (f *groupRule) emitGroup(ctx context.Context, parts []part, gid string, emit func(string, schemas.Sample), dropped func(string)) {
	// The group stage decided the group is done; the assembler merges its
	// parts: members in arrival order, the first copy of a replayed
	// member (same index) kept.
	asm := groups.New(groups.Config[member]{
		Key: func(*member) string { return gid },
		ID:  func(m *member) string { return strconv.Itoa(m.Sample.Index) },
	})
	for _, p := range parts {
		for _, m := range p.Members {
			asm.Add(m)
		}
	}
	var samples []schemas.Sample
	lost := 0
	origin, system, prompt := parts[0].Origin, parts[0].System, parts[0].Prompt
	if g, ok := asm.Take(gid); ok {
		for _, m := range g.Members {
			if m.Lost != "" {
				lost++
				continue
			}
			m.Sample.System, m.Sample.Prompt = system, prompt
			samples = append(samples, m.Sample)
		}
	}
	complete := lost == 0 && len(samples) == f.groupSize
	if !complete {
		cGroups.With(groupIncomplete).Add(ctx, 1)
		if f.dropIncomplete || len(samples) == 0 {
			cGroups.With(groupDropped).Add(ctx, 1)
			dropped(origin)
			return
		}
	} else {
		cGroups.With(groupComplete).Add(ctx, 1)
	}
	zero, err := advantage.Group(advantage.Method(f.method), samples, complete)
	if err != nil {
		panic(fmt.Errorf("train: group %s: %w", gid, err))
	}
	if zero {
		cGroups.With(groupZeroVariance).Add(ctx, 1)
		if f.dropZeroVariance {
			cGroups.With(groupDropped).Add(ctx, 1)
			dropped(origin)
			return
		}
	}
	for _, s := range samples {
		emit(origin, s)
	}
}
