package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"swerl/internal/atomicfile"
	"swerl/schemas"
	"swerl/sinks/kafkaio"
	"swerl/sinks/parquetio"
	"swerl/transforms/advantage"
	"swerl/transforms/groups"
	"swerl/transforms/reward"
)

func init() {
	register(&command{name: "replay", summary: "re-read a Kafka topic into Parquet, optionally re-scoring samples with the current reward", run: runReplay})
}

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("replay", "--topic T [--from-offset N | --from-time RFC3339] [--to-offset N | --to-time RFC3339] --out DIR [--rescore --instances FILE|DIR]", stderr)
	kf := addKafkaFlags(fs)
	fs.Lookup("brokers").Usage = "Kafka bootstrap brokers host:port,… (required: a replay reads an existing topic)"
	topic := fs.String("topic", "", "topic to re-read: instances, samples, weights, deadletter (prefixed by --topic-prefix) or any full topic name")
	kind := fs.String("kind", "", "what the topic holds: samples, instances, weights, deadletter or raw (default: from the topic name)")
	fromOffset := fs.Int64("from-offset", 0, "first offset of every partition")
	fromTime := fs.String("from-time", "", "start every partition at its first record at or after this RFC 3339 time")
	toOffset := fs.Int64("to-offset", 0, "stop every partition before this offset (0: at its end when the replay starts)")
	toTime := fs.String("to-time", "", "stop every partition before its first record at or after this RFC 3339 time")
	out := fs.String("out", "", "output root: DIR/samples/, DIR/instances/, DIR/weights/, DIR/raw/ and DIR/deadletter/ (undecodable records)")
	rescore := fs.Bool("rescore", false, "re-score samples with the current reward (--reward-timeout) and recompute their group advantages (--advantage; needs --instances)")
	instances := fs.String("instances", "", "instances for --rescore (code_context, oracle): a JSONL or Parquet file, or a directory of Parquet files")
	adv := new(string)
	addAdvantageFlag(fs, adv)
	timeout := new(time.Duration)
	addRewardTimeoutFlag(fs, timeout)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("unexpected arguments %q", fs.Args())
	case *topic == "":
		return usagef("want --topic")
	case *out == "":
		return usagef("want --out DIR")
	case *fromOffset < 0 || *toOffset < 0:
		return usagef("offsets are ≥ 0")
	case *fromOffset > 0 && *fromTime != "":
		return usagef("--from-offset and --from-time exclude each other")
	case *toOffset > 0 && *toTime != "":
		return usagef("--to-offset and --to-time exclude each other")
	case *rescore != (*instances != ""):
		return usagef("--rescore and --instances go together")
	case kf.brokers == "":
		return usagef("want --brokers: an embedded broker would start empty, with nothing to replay")
	}
	rc := kafkaio.ReadConfig{FromOffset: *fromOffset, ToOffset: *toOffset, Bounded: true}
	var err error
	if rc.FromTime, err = parseTimeFlag("from-time", *fromTime); err != nil {
		return err
	}
	if rc.ToTime, err = parseTimeFlag("to-time", *toTime); err != nil {
		return err
	}
	method, err := advantage.ParseMethod(*adv)
	if err != nil {
		return usagef("%v", err)
	}
	if *kind != "" && !slices.Contains([]string{kafkaio.KindSamples, kafkaio.KindInstances, kafkaio.KindWeights, kafkaio.KindDeadLetter, kafkaio.KindRaw}, *kind) {
		return usagef("--kind %q: want samples, instances, weights, deadletter or raw", *kind)
	}
	cfg := kafkaio.ReplayConfig{Kind: *kind, Out: *out, Progress: stderr}
	var rg *regrouper
	if *rescore {
		byID, err := loadInstances(*instances)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "replay: %d instances from %s for re-scoring\n", len(byID), *instances)
		rg = newRegrouper(rescorer(byID, method, *timeout))
		cfg.Rescore = rg
	}
	// Only reads: no topic is created (the account may not be allowed to).
	c, err := kf.config()
	if err != nil {
		return err
	}
	rc.Config = c
	rc.Topic = *topic
	if slices.Contains(kafkaio.TopicNames, *topic) {
		rc.Topic = c.Topic(*topic)
	}
	cfg.Read = rc
	// The files go to a staging folder under --out and into place once the
	// whole range is read: files of a replay stopped part way (a full
	// disk, an interrupt, kill -9) would hold part of the range, and a
	// rerun would add the whole range to them and keep those rows twice.
	stage, err := newReplayStage(*out, stderr)
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	cfg.Out = stage
	st, err := kafkaio.Replay(ctx, cfg)
	if err != nil {
		return err
	}
	files, err := publishReplay(stage, *out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "replayed %s: %d records → %d rows, %d dead-letter, %d files under %s", rc.Topic, st.Records, st.Rows, st.DeadLetter, files, *out)
	if *rescore {
		fmt.Fprintf(stdout, "; %d samples re-scored, %d incomplete groups", rg.rescored, rg.incomplete)
	}
	fmt.Fprintln(stdout)
	return nil
}

func parseTimeFlag(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return t, usagef("--%s %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", name, v)
	}
	return t, nil
}

// replayed is a sample of a replay and the record it was decoded from.
type replayed struct {
	s schemas.Sample
	m kafkaio.Message
}

// regrouper is replay's kafkaio.Rescorer: it assembles the samples read
// into their groups (transforms/groups, keyed by group id, every record
// kept) and calls rescore with every group once its last sample read makes
// GroupSize (a size ≤ 0: never), and at the end with what was read of the
// groups still incomplete, in group id order (complete false). The
// samples rescore returns are written; when it fails, every sample of the
// group goes to the dead-letter output with the reason.
type regrouper struct {
	asm                  *groups.Assembler[replayed]
	rescore              func(context.Context, []schemas.Sample, bool) ([]schemas.Sample, error)
	rescored, incomplete int64 // samples passed to rescore; groups passed incomplete
}

func newRegrouper(rescore func(context.Context, []schemas.Sample, bool) ([]schemas.Sample, error)) *regrouper {
	return &regrouper{rescore: rescore, asm: groups.New(groups.Config[replayed]{
		Key: func(r *replayed) string { return r.s.GroupID },
		Full: func(rs []replayed) bool {
			last := rs[len(rs)-1].s
			return last.GroupSize > 0 && len(rs) >= last.GroupSize
		},
	})}
}

func (rg *regrouper) Add(ctx context.Context, s schemas.Sample, m kafkaio.Message) ([]schemas.Sample, []schemas.DeadLetter, error) {
	done, _ := rg.asm.Add(replayed{s: s, m: m})
	return rg.finish(ctx, done)
}

func (rg *regrouper) End(ctx context.Context) ([]schemas.Sample, []schemas.DeadLetter, error) {
	rest := rg.asm.Flush()
	slices.SortFunc(rest, func(a, b *groups.Group[replayed]) int { return strings.Compare(a.Key, b.Key) })
	return rg.finish(ctx, rest)
}

// finish rescores gs, in order.
func (rg *regrouper) finish(ctx context.Context, gs []*groups.Group[replayed]) ([]schemas.Sample, []schemas.DeadLetter, error) {
	var out []schemas.Sample
	var dead []schemas.DeadLetter
	for _, g := range gs {
		ss := make([]schemas.Sample, len(g.Members))
		for i := range g.Members {
			ss[i] = g.Members[i].s
		}
		rg.rescored += int64(len(ss))
		if !g.Full {
			rg.incomplete++
		}
		got, err := rg.rescore(ctx, ss, g.Full)
		if err != nil {
			for i := range g.Members {
				dead = append(dead, kafkaio.DeadLetterFor(g.Members[i].m, "rescore", err))
			}
			continue
		}
		out = append(out, got...)
	}
	return out, dead, nil
}

// rescorer scores every sample of a group with the current search/replace
// reward against its instance and recomputes the group's advantages.
func rescorer(byID map[string]*schemas.Instance, m advantage.Method, timeout time.Duration) func(context.Context, []schemas.Sample, bool) ([]schemas.Sample, error) {
	return func(ctx context.Context, g []schemas.Sample, complete bool) ([]schemas.Sample, error) {
		for i := range g {
			in := byID[g[i].InstanceID]
			if in == nil {
				return nil, fmt.Errorf("instance %q of sample %s is not in --instances", g[i].InstanceID, g[i].ID)
			}
			rctx, cancel := context.WithTimeout(ctx, timeout)
			r := reward.SearchReplace(rctx, in.CodeContext, in.OracleNewContent, g[i].Completion)
			cancel()
			g[i].Reward, g[i].FormatError, g[i].Similarities = r.Reward, r.Error, r.Similarities
		}
		if _, err := advantage.Group(m, g, complete); err != nil {
			return nil, err
		}
		return g, nil
	}
}

// loadInstances reads instances from a JSONL file (one per line), a
// Parquet file, or a directory of Parquet files, indexed by id.
func loadInstances(path string) (map[string]*schemas.Instance, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	var list []schemas.Instance
	switch {
	case fi.IsDir():
		list, err = parquetio.ReadDir[schemas.Instance](path)
	case strings.HasSuffix(path, ".parquet"):
		list, err = parquetio.ReadFile[schemas.Instance](path)
	default:
		list, err = readInstancesJSONL(path)
	}
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*schemas.Instance, len(list))
	for i := range list {
		byID[list[i].ID] = &list[i]
	}
	return byID, nil
}

func readInstancesJSONL(path string) ([]schemas.Instance, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []schemas.Instance
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 256<<20)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		in, err := kafkaio.Decode[schemas.Instance](sc.Bytes(), fmt.Sprintf("%s:%d", path, line))
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, errors.New(path + ": no instances")
	}
	return out, nil
}

// replayStagePrefix starts the name of a replay's staging folder under
// --out.
const replayStagePrefix = ".replay-staging-"

// replayKinds are the output folders of a replay.
var replayKinds = []string{kafkaio.KindSamples, kafkaio.KindInstances, kafkaio.KindWeights, kafkaio.KindDeadLetter, kafkaio.KindRaw}

// newReplayStage removes the staging folders of replays under out that
// never finished, saying so, and makes a new one.
func newReplayStage(out string, stderr io.Writer) (string, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("replay: %w", err)
	}
	old, err := filepath.Glob(filepath.Join(out, replayStagePrefix+"*"))
	if err != nil {
		return "", fmt.Errorf("replay: %w", err)
	}
	for _, d := range old {
		if err := os.RemoveAll(d); err != nil {
			return "", fmt.Errorf("replay: removing %s: %w", d, err)
		}
		fmt.Fprintf(stderr, "replay: removed %s, the files of a replay that did not finish; its range is not in %s\n", d, out)
	}
	stage, err := os.MkdirTemp(out, replayStagePrefix+"*")
	if err != nil {
		return "", fmt.Errorf("replay: %w", err)
	}
	return stage, nil
}

// publishReplay moves the files of a finished replay from stage into
// out's folders, numbered after the files already there (earlier
// replays' are kept), and returns how many it moved.
func publishReplay(stage, out string) (int, error) {
	moved := 0
	for _, k := range replayKinds {
		files, err := parquetio.Files(filepath.Join(stage, k))
		if err != nil || len(files) == 0 {
			if err != nil {
				return moved, fmt.Errorf("replay: %w", err)
			}
			continue
		}
		dir := filepath.Join(out, k)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return moved, fmt.Errorf("replay: %w", err)
		}
		have, err := parquetio.Files(dir)
		if err != nil {
			return moved, fmt.Errorf("replay: %w", err)
		}
		seq := 0
		for _, f := range have {
			var n int
			if _, err := fmt.Sscanf(filepath.Base(f), "replay-%d.parquet", &n); err == nil && n >= seq {
				seq = n + 1
			}
		}
		for _, f := range files {
			dst := filepath.Join(dir, fmt.Sprintf("replay-%06d.parquet", seq))
			if err := os.Rename(f, dst); err != nil {
				return moved, fmt.Errorf("replay: moving %s into place: %w", dst, err)
			}
			seq++
			moved++
		}
		if err := atomicfile.SyncDir(dir); err != nil {
			return moved, err
		}
	}
	return moved, nil
}
