// Package train is swerl's streaming train pipeline, a Beam graph that turns
// SWE-RL instances into scored, group-normalized samples:
//
//	instances (Kafka swerl.instances, or a JSONL/Parquet file)
//	  → decode            bad JSON or an invalid instance → dead-letter
//	  → prompt + rollout  transforms/prompt.Build, then G completions from a
//	                      transforms/rollout Policy (http(s):, file:, model:),
//	                      up to Concurrency requests in flight
//	  → reward            transforms/reward.SearchReplace against the files
//	                      shown in the prompt, bounded by RewardTimeout
//	  → group + advantage the G scored rollouts of one instance, then
//	                      transforms/advantage (GRPO, Dr.GRPO, RLOO)
//	  → samples           Parquet files OUT/samples/*.parquet, then Kafka
//	                      swerl.samples (key: group id), then the input's
//	                      position is acknowledged
//
// Records that cannot be decoded, prompted, rolled out or scored go to the
// dead-letter outputs (OUT/deadletter/*.parquet and swerl.deadletter) with
// their source position and reason; the pipeline goes on.
//
// # Groups
//
// A group is the G rollouts of one instance for one input record. Its id is
// scoring.GroupID: Config.GroupPrefix + "<instance id>@<request index>",
// where the request index is the record's place in the file it came from
// (Feed puts it in the Kafka key, see RequestKey; a record keyed by the bare
// instance id is request 0). It does not depend on the broker offset, so a
// record read again after a restart, or a file fed again into the topic
// after a crash, produces the same group and sample ids (and the same
// sampling seed).
// The policy answers all G completions of an instance at once, so a group
// normally leaves the reward stage as one element holding all of it, and
// its advantages are computed right there, in the same fused stage, with no
// shuffle and no state. Parts of a group (should a policy or runner split
// one) go to a stateful DoFn keyed by group id that merges them; each of the
// two paths has its own sink. Every rollout that is lost on the way
// (the policy returned fewer than G completions, or scoring timed out)
// still reaches the group as a tombstone, so a group completes as soon as
// all G of its members are accounted for; a group with tombstones is
// incomplete and is emitted (advantages over the members present,
// group_complete false) or dropped, by Config.Incomplete. A group that
// never completes is finished by an event-time timer GroupTimeout after its
// first part, or when bounded input ends. Processing-time timers are not
// used: Prism v2.77 does not wake on real time, and one pending would keep
// a bounded pipeline from finishing.
//
// # Parallelism
//
// Prism runs a bundle on one goroutine, and a bounded read is one bundle, so
// decode, prompt building and rollout, and reward each run their work on a
// pool of goroutines (one slot a core; rollouts Concurrency slots shared by
// the run) and emit the results back on the bundle's goroutine, with their
// input's event time. The Parquet sink encodes and writes a full file in the
// background while the bundle goes on. A bundle finishes only after all of
// its work is out and durable.
//
// # Output and restarts
//
// The Parquet sink writes a file per RowsPerFile rows and one at the end of
// each bundle
// under a temporary name and renames it into place. It reads the sample ids
// already present under OUT/samples when it starts and skips any sample
// whose id it has seen, so replaying input after a restart adds no
// duplicate rows. After a file is in place its samples are produced to
// swerl.samples (kafkaio.WriteAcked, flushed per bundle), and only then is
// the input record's position acknowledged in OUT/positions
// (kafkaio.AckOrigins); a run resumes after the acknowledged positions, so
// a stop at any point loses nothing and re-reads only records whose output
// was not yet durable. Dead-letters of the decode, prompt and rollout
// stages acknowledge their record the same way; dropped groups acknowledge
// theirs directly. Kafka may see a sample twice after a crash; readers
// de-duplicate by sample id.
//
// Several workers (processes) can share the instances topic as a Kafka
// consumer group (Config.ConsumerGroup, swerl train --follow --group NAME): each
// reads the partitions the group assigns it, and the acknowledgements
// above commit offsets to the group (kafkaio.AckOriginsGroup) instead of
// positions files. Workers can join and leave a running group; a record
// whose worker died before committing it is read again by another, and
// because group ids and seeds follow the record, not the worker, it
// produces the same sample ids and completions: the copies on
// swerl.samples are removed by the learner, which trains a group id once.
//
// Feed copies a JSONL or Parquet file into the instances topic (bad lines
// become dead-letters naming FILE:LINE); with Config.FeedInstances a run
// does so and then reads the topic, which is how swerl train runs a file
// through its embedded broker.
//
// # Runs
//
// Run builds and runs one pipeline and may be called again in the same
// process (one call per RL round): Beam registration happens once in init,
// and the policy is opened per run. Under Prism (the default runner, in
// process with loopback workers) the Summary counts are exact; on remote
// runners they cover only the work done in this process, and the
// Prometheus metrics of each worker are authoritative.
package train
