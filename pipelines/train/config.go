package train

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"swerl/sinks/files"
	"swerl/sinks/kafkaio"
	"swerl/sinks/weightsync"
	"swerl/transforms/advantage"
	"swerl/transforms/reward"
	"swerl/transforms/scoring"
)

// Incomplete says what happens to a group that finishes with fewer than
// GroupSize scored members.
type Incomplete string

// Policies for incomplete groups.
const (
	IncompleteEmit Incomplete = "emit" // emit its members, advantages over those present
	IncompleteDrop Incomplete = "drop" // drop it (counted)
)

// ParseIncomplete accepts "emit" and "drop".
func ParseIncomplete(s string) (Incomplete, error) {
	switch Incomplete(s) {
	case IncompleteEmit, IncompleteDrop:
		return Incomplete(s), nil
	case "":
		return IncompleteEmit, nil
	}
	return "", fmt.Errorf("train: incomplete-group policy %q: want emit or drop", s)
}

// Config configures one run of the train pipeline.
type Config struct {
	// Kafka is the cluster for the instances, samples and dead-letter
	// topics. With no brokers the run uses no Kafka at all (Instances is
	// then required, and output goes to Parquet only).
	Kafka kafkaio.Config
	// Instances is a JSONL (one schemas.Instance per line) or Parquet file
	// of instances, read directly. Empty: read the instances topic.
	Instances string
	// FeedInstances first produces Instances to the instances topic (see
	// Feed) and then reads them back from Kafka like any other input: the
	// whole path through the broker. swerl train does this with its
	// embedded broker.
	FeedInstances bool
	// Policy is a transforms/rollout spec: "file:C.jsonl",
	// "http://host:port/v1", "model:DIR", …
	Policy string
	// Table, when set, is where an engine weight sync in this process
	// records the versions it loaded (weightsync.SpecSyncer), read by an
	// http(s) Policy opened in this process (rollout.WithTable). nil: the
	// policy keeps its own.
	Table *weightsync.Table
	// FollowAnnouncements makes an http(s) Policy with follow=true also
	// name the adapters a learner in another process announces, on the
	// weights topic of Kafka, that each engine holds (FollowWeights), so
	// engines that do not list their adapters are followed too. This
	// process and every Beam worker that opens its own policy (a remote
	// runner's) read the topic. false: the listings only.
	FollowAnnouncements bool
	// Spec is each instance's group: its prompt (Prompt's caps and
	// template), G completions (GroupSize, default 4) and the sampling
	// options passed to the policy (Temperature, MaxTokens, Seed; zero:
	// the policy's defaults).
	scoring.Spec
	// Method is the advantage estimator (default GRPO).
	Method advantage.Method
	// DropZeroVariance drops groups whose rewards are all equal (they are
	// counted either way).
	DropZeroVariance bool
	// GroupTimeout finishes a group that is still incomplete this long
	// after its first member arrived (default 10 minutes).
	GroupTimeout time.Duration
	// Incomplete is what happens to incomplete groups (default emit).
	Incomplete Incomplete
	// GroupPrefix is prepended to every group id, e.g. "round3/" when the
	// same instances file is replayed for a new round into the same Out:
	// without a new prefix a replay makes the same ids, which the sink and
	// the learner treat as copies.
	GroupPrefix string
	// Out is the output root: Out/samples and Out/deadletter (default
	// "swerl-out"), a local path or gs:// or s3:// (sinks/files); with
	// Kafka input it must be local, for Out/positions.
	Out string
	// SamplesDir, when set, receives the sample files instead of
	// Out/samples (swerl run stages each round's samples until its step
	// is published).
	SamplesDir string
	// Concurrency bounds the policy requests in flight in this process
	// (default 8).
	Concurrency int
	// RewardTimeout bounds the scoring of one completion (default 30 s);
	// a completion that runs out of time is dead-lettered.
	RewardTimeout time.Duration
	// ConsumerGroup, when set, reads the instances topic as a member of
	// this Kafka consumer group (kafkaio.JoinGroup): only the partitions the group
	// assigns this process, following rebalances as workers join and
	// leave, each partition from the group's committed offset; offsets are
	// committed to the group once the outputs of the records below them
	// are durable, in place of Out/positions. Unbounded reads only.
	//
	// A Kafka consumer group is not a GRPO group: those are the G
	// completions of one prompt (Spec.GroupSize, GroupTimeout,
	// GroupPrefix, Incomplete).
	ConsumerGroup string
	// ConsumerSessionTimeout is how long the consumer group waits for a silent member
	// (a worker that died) before its partitions go to the others
	// (default 10s; brokers refuse less than 6s by default).
	ConsumerSessionTimeout time.Duration
	// consumer is the handle of this run's consumer-group member (set by
	// Run; kafkaio.GroupMember.Handle).
	consumer string
	// Bounded stops when the input is drained: a Kafka read stops at the
	// end offsets seen when it starts (files are always bounded). Unbounded
	// runs keep reading until ctx is cancelled.
	Bounded bool
	// RowsPerFile caps the rows of one Parquet file (default 10000).
	RowsPerFile int
	// MetricsAddr serves Prometheus /metrics there ("" serves nothing).
	MetricsAddr string
	// Progress receives a progress line every ProgressEvery (default 2 s)
	// and the end summary; nil prints nothing.
	Progress      io.Writer
	ProgressEvery time.Duration
	// Runner is the Beam runner ("" uses the --runner flag, default prism).
	Runner string
}

// The defaults of Config's fields, which swerl train's flags share.
const (
	DefaultGroupTimeout  = 10 * time.Minute
	DefaultOut           = "swerl-out"
	DefaultConcurrency   = 8
	DefaultRowsPerFile   = 10000
	DefaultProgressEvery = 2 * time.Second
)

func (c *Config) defaults() error {
	c.GroupSize = cmp.Or(c.GroupSize, advantage.DefaultGroupSize)
	c.Method = cmp.Or(c.Method, advantage.GRPO)
	c.GroupTimeout = cmp.Or(c.GroupTimeout, DefaultGroupTimeout)
	c.Incomplete = cmp.Or(c.Incomplete, IncompleteEmit)
	c.Out = cmp.Or(c.Out, DefaultOut)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.RewardTimeout = cmp.Or(c.RewardTimeout, reward.DefaultTimeout)
	c.RowsPerFile = cmp.Or(c.RowsPerFile, DefaultRowsPerFile)
	c.ProgressEvery = cmp.Or(c.ProgressEvery, DefaultProgressEvery)
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	switch {
	case c.Policy == "":
		return errors.New("train: no policy (e.g. file:C.jsonl, http://host:port/v1, model:DIR)")
	case c.GroupSize < 1:
		return fmt.Errorf("train: group size %d, want ≥ 1", c.GroupSize)
	case c.Concurrency < 1:
		return fmt.Errorf("train: concurrency %d, want ≥ 1", c.Concurrency)
	case c.GroupTimeout < 0 || c.RewardTimeout < 0:
		return errors.New("train: timeouts must be positive")
	}
	if _, err := advantage.ParseMethod(string(c.Method)); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if _, err := ParseIncomplete(string(c.Incomplete)); err != nil {
		return err
	}
	if c.Instances != "" {
		if ok, err := files.Exists(context.Background(), c.Instances); err != nil || !ok {
			if err == nil {
				err = fmt.Errorf("%s: no such file", c.Instances)
			}
			return fmt.Errorf("train: instances: %w", err)
		}
	}
	if c.FollowAnnouncements && len(c.Kafka.Brokers) == 0 {
		return errors.New("train: following the adapters announced on the weights topic needs Kafka brokers")
	}
	if c.ConsumerGroup != "" {
		switch {
		case c.Instances != "" || c.FeedInstances:
			return errors.New("train: a consumer group reads the instances topic, not an instances file")
		case c.Bounded:
			return errors.New("train: a consumer group read is unbounded (its partitions come and go), not Bounded")
		case len(c.Kafka.Brokers) == 0:
			return errors.New("train: a consumer group needs Kafka brokers")
		case c.ConsumerSessionTimeout < 0:
			return errors.New("train: the group session timeout must be positive")
		}
	}
	if files.IsRemote(c.Out) && (c.FeedInstances || c.Instances == "") && c.ConsumerGroup == "" {
		// kafkaio keeps the acknowledged positions in local files under
		// Out/positions, which an object store cannot hold.
		return fmt.Errorf("train: out %s is object storage, but reading the instances topic keeps its positions in local files under out: give a local out, or read the instances file without the topic", c.Out)
	}
	if len(c.Kafka.Brokers) > 0 {
		if err := c.Kafka.Validate(); err != nil {
			return fmt.Errorf("train: %w", err)
		}
	} else if c.Instances == "" || c.FeedInstances {
		return errors.New("train: no Kafka brokers: want Instances (a JSONL or Parquet file) and no FeedInstances")
	}
	return nil
}

// Summary counts what one run did.
type Summary struct {
	Records        int64   // input records read
	Instances      int64   // instances decoded and prompted
	Rollouts       int64   // completions received from the policy
	Scored         int64   // completions scored
	FormatErrors   int64   // scored completions with a format error (reward −1)
	Groups         int64   // groups finished
	ZeroVariance   int64   // finished groups whose rewards were all equal
	Incomplete     int64   // finished groups with fewer than GroupSize members
	DroppedGroups  int64   // groups dropped (zero variance or incomplete, by config)
	Samples        int64   // sample rows written (after de-duplication)
	Duplicates     int64   // samples skipped because their id was already written
	DeadLetters    int64   // records routed to the dead-letter outputs
	MeanReward     float64 // mean reward of the samples written
	Files          int64   // Parquet files written (samples and dead-letters)
	Fed            int64   // instances produced to the topic by FeedInstances
	PolicyVersion  int64   // newest policy version seen in a response (-1: unknown)
	ElapsedSeconds float64
}

// String is the one-line end summary.
func (s Summary) String() string {
	return fmt.Sprintf("train: %d records, %d instances, %d rollouts, %d samples written (%d duplicates skipped), mean reward %.4f, %d format errors, %d groups (%d zero-variance, %d incomplete, %d dropped), %d dead-letters, %d files, policy v%d, %.1fs",
		s.Records, s.Instances, s.Rollouts, s.Samples, s.Duplicates, s.MeanReward, s.FormatErrors, s.Groups, s.ZeroVariance, s.Incomplete, s.DroppedGroups, s.DeadLetters, s.Files, s.PolicyVersion, s.ElapsedSeconds)
}
