// Package train is swerl's streaming train pipeline, a Beam graph that turns
// SWE-RL instances into scored, group-normalized samples:
//
//	instances (Kafka or a JSONL/Parquet file)
//	  → decode            bad JSON or an invalid instance → dead-letter
//	  → prompt + rollout  transforms/prompt.Build, then G completions from a
//	                      transforms/rollout Policy (http(s):, file:, model:)
//	  → reward            transforms/reward.SearchReplace against the files
//	                      shown in the prompt, bounded by RewardTimeout
//	  → group             a stateful DoFn keyed by group id collects the G
//	                      scored rollouts of one instance
//	  → advantage         transforms/advantage (GRPO, Dr.GRPO, RLOO)
//	  → samples           Kafka swerl.samples (key: group id) and Parquet
//	                      files OUT/samples/*.parquet
//
// Records that cannot be decoded, prompted, rolled out or scored go to the
// dead-letter outputs (OUT/deadletter/*.parquet and swerl.deadletter) with
// their source position and reason; the pipeline goes on.
//
// # Groups
//
// A group is the G rollouts of one instance for one input record. Its id is
// "<instance id>@<source position>" (plus Config.GroupPrefix), so a record
// that is read again after a restart produces the same group and sample ids.
// Every rollout that is lost on the way (the policy returned fewer than G
// completions, or scoring failed) still reaches the group as a tombstone, so
// a group completes as soon as all G of its members are accounted for; a
// group with tombstones is incomplete and is emitted or dropped by
// Config.Incomplete. A group that never completes (its input was cut off) is
// finished after GroupTimeout of processing time, or when the input ends.
//
// # Output and restarts
//
// The Parquet sink writes one file per bundle under a temporary name and
// renames it into place. It reads the sample ids already present under
// OUT/samples when it starts and skips any sample whose id it has seen, so
// replaying input after a restart adds no duplicate rows.
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
