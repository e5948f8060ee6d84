package agentless

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"swerl/pipelines/beamrun"
	"swerl/transforms/agentless"
	"swerl/transforms/rollout"
)

// The pipeline (Build), every element keyed by the row's place in the
// input, so that rows sharing an instance id stay apart:
//
//	rows ─ fanout ─┬─ localize requests ─ localize (policy) ─┐
//	               ├─ instance tree ─────────────────────────┴─ GroupByKey ─ merge ─┐
//	               │                                                                ├─ repair requests ─ repair (policy) ─ apply/normalize ─┐
//	               │                                                                └─ instance info ───────────────────────────────────────┤
//	               └─ rows that failed ─────────────────────────────────────────────────────────────────────────────────────────────────────┴─ GroupByKey ─ vote ─ write
//
// Policy requests run on a pool of Params.Concurrency goroutines shared by
// the localize and repair steps of this process (beamrun.Async: a Prism
// bundle runs on one goroutine), the git reads, edit application,
// normalization and tests on one goroutine a core.

// Params are the settings every step carries to its workers.
type Params struct {
	LocalizeSamples, RepairSamples, MaxFiles int
	Temperature                              float64
	MaxTokens, MaxInputTokens                int
	Seed                                     int64
	Model                                    string
	// RepairBatch is the most repair samples one request asks for; 0: all
	// of an instance's samples in one request (as Agentless Mini asks).
	RepairBatch int
	// TestCommand, when set, is run in a checkout of base_commit with each
	// candidate applied (agentless.LocalExecutor).
	TestCommand string
}

func (p Params) options() agentless.Options {
	return agentless.Options{LocalizeSamples: p.LocalizeSamples, RepairSamples: p.RepairSamples, MaxFiles: p.MaxFiles,
		Temperature: p.Temperature, MaxTokens: p.MaxTokens, MaxInputTokens: p.MaxInputTokens, Seed: p.Seed, Model: p.Model}.WithDefaults()
}

// row is one input row on its way in.
type row struct {
	Index   int    // place among the good rows of the input
	ID      string // instance_id
	Repo    string // owner/name
	Clone   string // local clone holding Commit; "" when none was given
	Commit  string
	Problem string
}

func (r row) key() string { return strconv.Itoa(r.Index) }

// instance is a row with the localizable files of its tree.
type instance struct {
	Row    row
	Paths  []string
	TreeNS time.Duration // listing the tree and building the prompts
}

// locReq is one localization sample of an instance.
type locReq struct {
	Key, ID string
	Sample  int
	Prompt  string
}

// locAns is the policy's answer to a locReq.
type locAns struct {
	Sample   int
	Texts    []string
	PolicyNS time.Duration
	Err      string
}

// locPiece is what merge gets of an instance: its tree or one answer.
type locPiece struct {
	Inst *instance `json:",omitempty"`
	Ans  *locAns   `json:",omitempty"`
}

// repairReq asks for N repair samples of an instance, from sample First.
type repairReq struct {
	Key, ID  string
	First, N int
	Prompt   string
	Files    map[string]string // the files the prompt shows
}

// answered is the policy's answer to a repairReq.
type answered struct {
	Key, ID  string
	First, N int
	Texts    []string
	Files    map[string]string
	PolicyNS time.Duration
	Err      string
}

// info is what the localize stages learned of an instance.
type info struct {
	Row       row
	Localized []string
	Omitted   []string
	Malformed int
	// Batches is how many repair requests were made.
	Batches int
	// LocalizeNS: listing the tree, the prompts, the requests, merging;
	// PrepareNS: reading the localized files and building the repair
	// prompt; PolicyNS: the localize requests.
	LocalizeNS, PrepareNS, PolicyNS time.Duration
	Err                             string
}

// piece is what the vote gets of an instance: its info, a candidate, or
// how a repair request went.
type piece struct {
	Info                 *info                `json:",omitempty"`
	Cand                 *agentless.Candidate `json:",omitempty"`
	ApplyNS, NormalizeNS time.Duration
	// Batch is set for a repair request's own piece: its time and error.
	Batch    bool
	RepairNS time.Duration
	Err      string
}

// outcome is everything learned about one row.
type outcome struct {
	Info       info
	Prediction agentless.Prediction
	Candidates []agentless.Candidate
	PolicyNS   time.Duration // localize and repair requests
	Stages     agentless.StageTimes
	Err        string
}

// JSON coders of the element types: distinct named functions, because
// Beam's function registry cannot tell instantiations of a generic apart.
func encodeRow(v row) ([]byte, error)             { return json.Marshal(&v) }
func decodeRow(b []byte) (v row, err error)       { err = json.Unmarshal(b, &v); return }
func encodeLocReq(v locReq) ([]byte, error)       { return json.Marshal(&v) }
func decodeLocReq(b []byte) (v locReq, err error) { err = json.Unmarshal(b, &v); return }
func encodeLocPiece(v locPiece) ([]byte, error)   { return json.Marshal(&v) }
func decodeLocPiece(b []byte) (v locPiece, err error) {
	err = json.Unmarshal(b, &v)
	return
}
func encodeRepairReq(v repairReq) ([]byte, error) { return json.Marshal(&v) }
func decodeRepairReq(b []byte) (v repairReq, err error) {
	err = json.Unmarshal(b, &v)
	return
}
func encodeAnswered(v answered) ([]byte, error) { return json.Marshal(&v) }
func decodeAnswered(b []byte) (v answered, err error) {
	err = json.Unmarshal(b, &v)
	return
}
func encodePiece(v piece) ([]byte, error)       { return json.Marshal(&v) }
func decodePiece(b []byte) (v piece, err error) { err = json.Unmarshal(b, &v); return }
func encodeOutcome(v outcome) ([]byte, error)   { return json.Marshal(&v) }
func decodeOutcome(b []byte) (v outcome, err error) {
	err = json.Unmarshal(b, &v)
	return
}

func init() {
	beam.RegisterCoder(reflect.TypeOf(row{}), encodeRow, decodeRow)
	beam.RegisterCoder(reflect.TypeOf(locReq{}), encodeLocReq, decodeLocReq)
	beam.RegisterCoder(reflect.TypeOf(locPiece{}), encodeLocPiece, decodeLocPiece)
	beam.RegisterCoder(reflect.TypeOf(repairReq{}), encodeRepairReq, decodeRepairReq)
	beam.RegisterCoder(reflect.TypeOf(answered{}), encodeAnswered, decodeAnswered)
	beam.RegisterCoder(reflect.TypeOf(piece{}), encodePiece, decodePiece)
	beam.RegisterCoder(reflect.TypeOf(outcome{}), encodeOutcome, decodeOutcome)

	register.DoFn6x0[context.Context, beam.EventTime, row, func(beam.EventTime, string, locPiece), func(beam.EventTime, locReq), func(beam.EventTime, string, piece)](&fanoutFn{})
	register.DoFn4x0[context.Context, beam.EventTime, locReq, func(beam.EventTime, string, locPiece)](&localizeFn{})
	register.DoFn6x0[context.Context, beam.EventTime, string, func(*locPiece) bool, func(beam.EventTime, string, piece), func(beam.EventTime, repairReq)](&mergeFn{})
	register.DoFn4x0[context.Context, beam.EventTime, repairReq, func(beam.EventTime, answered)](&repairFn{})
	register.DoFn4x0[context.Context, beam.EventTime, answered, func(beam.EventTime, string, piece)](&applyFn{})
	register.DoFn5x0[context.Context, beam.EventTime, string, func(*piece) bool, func(beam.EventTime, outcome)](&voteFn{})
	register.DoFn3x1[context.Context, int, func(*outcome) bool, error](&writeFn{})
	register.Emitter3[beam.EventTime, string, locPiece]()
	register.Emitter2[beam.EventTime, locReq]()
	register.Emitter3[beam.EventTime, string, piece]()
	register.Emitter2[beam.EventTime, repairReq]()
	register.Emitter2[beam.EventTime, answered]()
	register.Emitter2[beam.EventTime, outcome]()
	register.Iter1[locPiece]()
	register.Iter1[piece]()
	register.Iter1[outcome]()
}

// Build adds the pipeline over rows (a PCollection<row>) to s; w writes
// the outputs.
func Build(s beam.Scope, runID, policy string, concurrency int, p Params, rows beam.PCollection, w writeFn) {
	insts, locReqs, failed := beam.ParDo3(s, &fanoutFn{P: p}, rows)
	answers := beam.ParDo(s, &localizeFn{RunID: runID, Policy: policy, Concurrency: concurrency, P: p}, locReqs)
	localized := beam.GroupByKey(s, beam.Flatten(s, insts, answers))
	infos, repairReqs := beam.ParDo2(s, &mergeFn{P: p}, localized)
	repaired := beam.ParDo(s, &repairFn{RunID: runID, Policy: policy, Concurrency: concurrency, P: p}, repairReqs)
	cands := beam.ParDo(s, &applyFn{}, repaired)
	byRow := beam.GroupByKey(s, beam.Flatten(s, failed, infos, cands))
	outcomes := beam.ParDo(s, &voteFn{RunID: runID, P: p}, byRow)
	beam.ParDo0(s, &w, beam.GroupByKey(s, beam.AddFixedKey(s, outcomes)))
}

// runState is what the steps of one run share in this process: the
// policy, the pool of policy requests, the run's context and the progress
// callback. The launcher registers it before the run (in-process runners
// then reuse its policy); a remote worker makes its own on first use.
type runState struct {
	ctx      context.Context
	policy   rollout.Policy
	sem      chan struct{}
	progress func(outcome)
}

// runs holds each run's state in this process (beamrun.Registry: Run
// registers it for the run's life; a worker of another process makes its
// own in stateOf, which lives as long as the worker).
var runs = beamrun.NewRegistry[*runState]("agentless run state")

// stateOf returns the state of run id, making one for a worker that the
// launcher's process is not (its policy is opened here, and stays open for
// the worker's life: the run's steps share it).
func stateOf(id, policy string, concurrency int) (*runState, error) {
	return runs.LoadOrCreate(id, func() (*runState, error) {
		pol, err := rollout.Open(policy)
		if err != nil {
			return nil, err
		}
		return &runState{ctx: context.Background(), policy: pol, sem: make(chan struct{}, max(concurrency, 1))}, nil
	})
}

// openRun is the Setup of a step that asks the policy.
func openRun(runID, policy string, concurrency int) (*runState, error) {
	st, err := stateOf(runID, policy, concurrency)
	if err != nil {
		return nil, fmt.Errorf("agentless: policy %s: %w", policy, err)
	}
	return st, nil
}

// fanoutFn lists a row's tree at base_commit and emits the row's tree
// (keyed by row) and one localization request a sample; a row whose tree
// cannot be read goes out on failed, with the reason.
type fanoutFn struct {
	P    Params
	work *beamrun.Async[fanned]
}

type fanned struct {
	key  string
	inst *instance
	reqs []locReq
	fail *piece
}

func (f *fanoutFn) Setup() { f.work = beamrun.NewAsync[fanned](beamrun.CPUSlots(), nil) }

func (f *fanoutFn) ProcessElement(ctx context.Context, ts beam.EventTime, r row, inst func(beam.EventTime, string, locPiece), reqs func(beam.EventTime, locReq), failed func(beam.EventTime, string, piece)) {
	f.work.Submit(ts, func() fanned { return f.fan(ctx, r) }, fannedOut(inst, reqs, failed))
}

func (f *fanoutFn) FinishBundle(inst func(beam.EventTime, string, locPiece), reqs func(beam.EventTime, locReq), failed func(beam.EventTime, string, piece)) {
	f.work.Wait(fannedOut(inst, reqs, failed))
}

func fannedOut(inst func(beam.EventTime, string, locPiece), reqs func(beam.EventTime, locReq), failed func(beam.EventTime, string, piece)) func(beam.EventTime, fanned) {
	return func(ts beam.EventTime, o fanned) {
		if o.fail != nil {
			failed(ts, o.key, *o.fail)
			return
		}
		inst(ts, o.key, locPiece{Inst: o.inst})
		for _, q := range o.reqs {
			reqs(ts, q)
		}
	}
}

func (f *fanoutFn) fan(ctx context.Context, r row) fanned {
	start := time.Now()
	fail := func(err string) fanned {
		return fanned{key: r.key(), fail: &piece{Info: &info{Row: r, Err: err}}}
	}
	if r.Clone == "" {
		return fail(fmt.Sprintf("%s: no clone for repo %q (--repo or --repos)", r.ID, r.Repo))
	}
	all, err := pythonPaths(ctx, r.Clone, r.Commit)
	if err != nil {
		return fail(fmt.Sprintf("%s: %v", r.ID, err))
	}
	paths := agentless.LocalizablePaths(all)
	out := fanned{key: r.key(), inst: &instance{Row: r, Paths: paths}}
	for s, prompt := range agentless.LocalizePrompts(r.ID, r.Problem, paths, f.P.options()) {
		out.reqs = append(out.reqs, locReq{Key: r.key(), ID: r.ID, Sample: s, Prompt: prompt})
	}
	out.inst.TreeNS = time.Since(start)
	return out
}

// localizeFn asks the policy for one localization sample.
type localizeFn struct {
	RunID, Policy string
	Concurrency   int
	P             Params
	st            *runState
	work          *beamrun.Async[keyedLoc]
}

type keyedLoc struct {
	key string
	ans locAns
}

func (f *localizeFn) Setup() error {
	st, err := openRun(f.RunID, f.Policy, f.Concurrency)
	if err != nil {
		return err
	}
	f.st = st
	f.work = beamrun.NewAsync[keyedLoc](0, st.sem)
	return nil
}

func (f *localizeFn) ProcessElement(ctx context.Context, ts beam.EventTime, q locReq, emit func(beam.EventTime, string, locPiece)) {
	f.work.Submit(ts, func() keyedLoc {
		t0 := time.Now()
		resp, err := f.st.policy.Complete(f.st.ctx, agentless.LocalizeRequest(q.ID, q.Prompt, q.Sample, f.P.options()))
		a := locAns{Sample: q.Sample, PolicyNS: time.Since(t0)}
		if err != nil {
			a.Err = fmt.Sprintf("agentless: %s: localize: %v", q.ID, err)
		}
		for _, c := range resp.Completions {
			a.Texts = append(a.Texts, c.Text)
		}
		cLocalize.Add(ctx, 1)
		return keyedLoc{q.Key, a}
	}, locOut(emit))
}

func (f *localizeFn) FinishBundle(emit func(beam.EventTime, string, locPiece)) {
	f.work.Wait(locOut(emit))
}

func locOut(emit func(beam.EventTime, string, locPiece)) func(beam.EventTime, keyedLoc) {
	return func(ts beam.EventTime, k keyedLoc) { emit(ts, k.key, locPiece{Ans: &k.ans}) }
}

// mergeFn merges an instance's localization samples, reads the localized
// files and emits the instance's info and its repair requests (Params.
// RepairBatch samples each, or all in one).
type mergeFn struct {
	P    Params
	work *beamrun.Async[merged]
}

type merged struct {
	key  string
	info info
	reqs []repairReq
}

func (f *mergeFn) Setup() { f.work = beamrun.NewAsync[merged](beamrun.CPUSlots(), nil) }

func (f *mergeFn) ProcessElement(ctx context.Context, ts beam.EventTime, key string, pieces func(*locPiece) bool, infos func(beam.EventTime, string, piece), reqs func(beam.EventTime, repairReq)) {
	var inst *instance
	var answers []locAns
	var lp locPiece
	for pieces(&lp) {
		if lp.Inst != nil {
			inst = lp.Inst
		}
		if lp.Ans != nil {
			answers = append(answers, *lp.Ans)
		}
		lp = locPiece{}
	}
	f.work.Submit(ts, func() merged { return f.merge(ctx, key, inst, answers) }, mergedOut(infos, reqs))
}

func (f *mergeFn) FinishBundle(infos func(beam.EventTime, string, piece), reqs func(beam.EventTime, repairReq)) {
	f.work.Wait(mergedOut(infos, reqs))
}

func mergedOut(infos func(beam.EventTime, string, piece), reqs func(beam.EventTime, repairReq)) func(beam.EventTime, merged) {
	return func(ts beam.EventTime, m merged) {
		infos(ts, m.key, piece{Info: &m.info})
		for _, q := range m.reqs {
			reqs(ts, q)
		}
	}
}

func (f *mergeFn) merge(ctx context.Context, key string, inst *instance, answers []locAns) merged {
	start := time.Now()
	m := merged{key: key}
	if inst == nil { // cannot happen: fanout emits the tree with the requests
		m.info.Err = fmt.Sprintf("row %s: localization answers without the tree", key)
		return m
	}
	m.info.Row = inst.Row
	o := f.P.options()
	sort.Slice(answers, func(i, j int) bool { return answers[i].Sample < answers[j].Sample })
	exists := make(map[string]bool, len(inst.Paths))
	for _, p := range inst.Paths {
		exists[p] = true
	}
	var ranked [][]string
	for _, a := range answers {
		m.info.PolicyNS += a.PolicyNS
		if a.Err != "" {
			if m.info.Err == "" {
				m.info.Err = a.Err
			}
			continue
		}
		found := agentless.ParseLocalization(a.Texts, exists)
		if len(found) == 0 {
			m.info.Malformed++
		}
		ranked = append(ranked, found)
	}
	if m.info.Err != "" {
		m.info.LocalizeNS = inst.TreeNS + m.info.PolicyNS + time.Since(start)
		return m
	}
	m.info.Localized = agentless.MergeLocalizations(ranked, o.MaxFiles)
	m.info.LocalizeNS = inst.TreeNS + m.info.PolicyNS + time.Since(start)
	if len(m.info.Localized) == 0 {
		return m
	}
	t0 := time.Now()
	r := inst.Row
	read, err := readFiles(ctx, r.Clone, r.Commit, m.info.Localized)
	if err != nil {
		m.info.Err = fmt.Sprintf("%s: %v", r.ID, err)
		return m
	}
	rep := agentless.BuildRepair(r.Problem, m.info.Localized, read, o)
	m.info.Omitted = rep.Omitted
	batch := f.P.RepairBatch
	if batch <= 0 {
		batch = o.RepairSamples
	}
	for first := 0; first < o.RepairSamples; first += batch {
		n := min(batch, o.RepairSamples-first)
		m.reqs = append(m.reqs, repairReq{Key: key, ID: r.ID, First: first, N: n, Prompt: rep.Prompt, Files: rep.Files})
	}
	m.info.Batches = len(m.reqs)
	m.info.PrepareNS = time.Since(t0)
	return m
}

// repairFn asks the policy for a request's repair samples.
type repairFn struct {
	RunID, Policy string
	Concurrency   int
	P             Params
	st            *runState
	work          *beamrun.Async[answered]
}

func (f *repairFn) Setup() error {
	st, err := openRun(f.RunID, f.Policy, f.Concurrency)
	if err != nil {
		return err
	}
	f.st = st
	f.work = beamrun.NewAsync[answered](0, st.sem)
	return nil
}

func (f *repairFn) ProcessElement(ctx context.Context, ts beam.EventTime, q repairReq, emit func(beam.EventTime, answered)) {
	f.work.Submit(ts, func() answered {
		t0 := time.Now()
		resp, err := f.st.policy.Complete(f.st.ctx, agentless.RepairRequest(q.ID, q.Prompt, q.First, q.N, f.P.options()))
		a := answered{Key: q.Key, ID: q.ID, First: q.First, N: q.N, Files: q.Files, PolicyNS: time.Since(t0)}
		if err != nil {
			a.Err = fmt.Sprintf("agentless: %s: repair: %v", q.ID, err)
		}
		for _, c := range resp.Completions {
			a.Texts = append(a.Texts, c.Text)
		}
		cRepair.Add(ctx, int64(len(a.Texts)))
		return a
	}, func(ts beam.EventTime, a answered) { emit(ts, a) })
}

func (f *repairFn) FinishBundle(emit func(beam.EventTime, answered)) {
	f.work.Wait(func(ts beam.EventTime, a answered) { emit(ts, a) })
}

// applyFn applies and normalizes each answer of a repair request on its
// own goroutine (one a core), sharing a memoizing engine: the answers
// edit the same files.
type applyFn struct {
	work *beamrun.Async[keyedPiece]
}

type keyedPiece struct {
	key string
	p   piece
}

func (f *applyFn) Setup() { f.work = beamrun.NewAsync[keyedPiece](beamrun.CPUSlots(), nil) }

func (f *applyFn) ProcessElement(ctx context.Context, ts beam.EventTime, a answered, emit func(beam.EventTime, string, piece)) {
	out := func(ts beam.EventTime, k keyedPiece) { emit(ts, k.key, k.p) }
	emit(ts, a.Key, piece{Batch: true, RepairNS: a.PolicyNS, Err: a.Err})
	if a.Err != "" {
		return
	}
	eng := agentless.Memoize(agentless.DefaultEngine())
	for i, text := range a.Texts {
		f.work.Submit(ts, func() keyedPiece {
			c, apply, norm := agentless.RepairCandidate(a.ID, a.First+i, text, a.Files, eng)
			if c.Dropped != "" {
				cDropped.With(dropClass(c.Dropped)).Add(ctx, 1)
			}
			return keyedPiece{a.Key, piece{Cand: &c, ApplyNS: apply, NormalizeNS: norm}}
		}, out)
	}
}

func (f *applyFn) FinishBundle(emit func(beam.EventTime, string, piece)) {
	f.work.Wait(func(ts beam.EventTime, k keyedPiece) { emit(ts, k.key, k.p) })
}

// voteFn gathers a row's info and candidates, votes (running the tests
// first when Params.TestCommand is set) and emits the row's outcome.
type voteFn struct {
	RunID string
	P     Params
	work  *beamrun.Async[outcome]
}

func (f *voteFn) Setup() { f.work = beamrun.NewAsync[outcome](beamrun.CPUSlots(), nil) }

func (f *voteFn) ProcessElement(ctx context.Context, ts beam.EventTime, key string, pieces func(*piece) bool, emit func(beam.EventTime, outcome)) {
	var o outcome
	var p piece
	for pieces(&p) {
		switch {
		case p.Info != nil:
			o.Info = *p.Info
		case p.Cand != nil:
			o.Candidates = append(o.Candidates, *p.Cand)
			o.Stages.Apply += p.ApplyNS
			o.Stages.Normalize += p.NormalizeNS
		case p.Batch:
			o.Stages.Repair += p.RepairNS
			o.PolicyNS += p.RepairNS
			if p.Err != "" && o.Err == "" {
				o.Err = p.Err
			}
		}
		p = piece{}
	}
	f.work.Submit(ts, func() outcome { return f.vote(o) }, f.out(emit))
}

func (f *voteFn) FinishBundle(emit func(beam.EventTime, outcome)) { f.work.Wait(f.out(emit)) }

func (f *voteFn) out(emit func(beam.EventTime, outcome)) func(beam.EventTime, outcome) {
	return func(ts beam.EventTime, o outcome) {
		if st, ok := runs.Find(f.RunID); ok && st.progress != nil {
			st.progress(o)
		}
		emit(ts, o)
	}
}

func (f *voteFn) vote(o outcome) outcome {
	ctx := context.Background()
	if st, ok := runs.Find(f.RunID); ok {
		ctx = st.ctx
	}
	in := o.Info
	if o.Err == "" {
		o.Err = in.Err
	}
	o.Prediction = agentless.Prediction{InstanceID: in.Row.ID, Model: f.P.Model}
	o.PolicyNS += in.PolicyNS
	o.Stages.Localize = in.LocalizeNS
	o.Stages.Repair += in.PrepareNS
	sort.Slice(o.Candidates, func(i, j int) bool { return o.Candidates[i].Sample < o.Candidates[j].Sample })
	if o.Err != "" {
		return o
	}
	start := time.Now()
	var exec agentless.Executor
	if f.P.TestCommand != "" {
		exec = agentless.LocalExecutor{Repo: in.Row.Clone, Command: f.P.TestCommand}
	}
	if best := agentless.Decide(ctx, in.Row.Commit, o.Candidates, exec); best >= 0 {
		o.Prediction.ModelPatch = o.Candidates[best].ModelPatch
	}
	o.Stages.Vote = time.Since(start)
	return o
}

// dropClass is the reason a candidate was dropped without its details
// (what follows the first colon), for counting.
func dropClass(reason string) string {
	if i := strings.IndexByte(reason, ':'); i >= 0 {
		return reason[:i]
	}
	return reason
}
