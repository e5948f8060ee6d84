// Package mine is the Beam batch pipeline behind `swerl mine`: it turns the
// history of local git repositories (and, optionally, GH Archive events)
// into SWE-RL instances (schemas.Instance).
//
// # Behavior
//
// One DoFn per repository streams every commit reachable from HEAD and
// Config.Refs (whichever branch it was made on: maintenance branches merged
// forward included) through `git log` and finds merged pull requests:
// GitHub merge commits "Merge pull request #N" (with one parent too), squash
// merges "(#N)", merge commits whose subject ends in "(#N)", rebase merges
// (the "(#N)" commit and the run of commits the same rebase wrote before
// it: one committer, one commit time), and merge commits of merged
// PullRequestEvents. A PR number merged by several commits is kept once, at
// its earliest merge (a first pass over the log finds it, keeping the
// commits that can become candidates, up to 16 MiB, so the log is read
// again only past that); the others are counted as merged_twice. With Config.Commits every other
// non-merge commit of the refs' first-parent lines becomes a candidate too
// (source "commit", id "owner/repo@<sha12>"). Candidates are
// reshuffled, then read by many workers through `git cat-file --batch`
// processes (one per two cores and repository, requests pipelined) and caches of
// trees and blobs: base = the merge base of the PR head with its target (the
// parent for squash merges and commits), code context = every modified
// file at the base plus relevant files (mining.Rank), oracle = the files at
// the PR head, oracle patch = reward.GitDiff of the two. The filters of
// package mining run in between; identical oracle patches are kept once
// (smallest id). Every candidate not kept is counted by reason; repository
// and input faults (missing objects, git errors, bad event lines, no merge
// base) are also written as schemas.DeadLetter rows.
//
// # Outputs
//
// DIR/instances/part-<hash>.parquet (at most Config.RowsPerFile instances a
// file, sorted by id, the name a hash of the ids; a larger group is cut into
// id ranges of at least 256 instances, up to one a core, written in
// parallel; earlier part files are removed at the start of a run),
// DIR/deadletter/mine.parquet when there are dead letters, DIR/instances.jsonl
// (or Config.JSONLPath) with Config.JSONL, and whatever Config.Publish does
// with the kept instances (the Kafka topic swerl.instances in `swerl mine`).
//
// # Memory
//
// Built instances do not stay in memory or cross the shuffle: the build
// workers write each one as a binary record to scratch files in
// DIR/instances/.staging (removed at the end; S2-compressed when DIR is in
// object storage), and only its id, patch key
// and location go through the runner; the finalize step streams the
// records of at most Config.RowsPerFile instances into one file, a record
// at a time. Peak memory is a batch of instances per build worker plus one
// Parquet writer per core, whatever the length of the history; what grows
// with it is the runner's small per-instance references and the commit
// graph. The `swerl mine` command also paces the garbage collector
// (package internal/gcpace: GOGC=200 under a memory limit of max(256 MiB,
// twice the live heap + 64 MiB)), trading a bounded amount of memory for
// a tenth of the CPU the default pace spent collecting.
//
// # Runners
//
// The pipeline runs on Prism by default and unchanged on Flink or Dataflow
// (Config.Runner or Beam's --runner flag). The output directory and the
// event files may be local paths or in object storage (gs://, s3://:
// package sinks/files, Beam's filesystem API), where every worker reaches
// them; staging files then go to the bucket too (written locally, uploaded
// whole; finalize downloads each one it reads). Local repositories, and
// the clones of repositories given by URL (made in a local temporary
// directory when the output is remote), must be readable at the same
// paths on every worker.
// The live progress line, and the line a repository as each finishes when
// several are mined, count what in-process workers report (Prism's
// loopback workers); the end summary comes from the counts each bundle
// emits as data, summed into a scratch file (exact on every runner: Prism
// can lose metric values of bundles that end at once), or from Beam's
// metrics when there is no such file.
//
// # Determinism
//
// For the same inputs and configuration the instance files hold the same
// rows, whatever the runner's bundling.
package mine
