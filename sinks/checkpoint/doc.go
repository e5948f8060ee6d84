// Package checkpoint is the learner's versioned checkpoint store: one
// directory a published policy version (checkpoints/v000123, in the Hugging
// Face layout written by package swerl/gpu/hf) and a Parquet index
// (index.parquet, one schemas.WeightVersion row a version).
//
// # Delivery guarantees
//
// Publish writes into a temporary directory, fsyncs and hashes (sha256)
// every file, renames the directory into place, then rewrites the small
// index to a temporary file and renames it. Whatever the point of a crash,
// the index names only complete directories; a directory without an index
// row was never announced and is replaced by the next publish of its
// version; temporary directories are removed by Open.
//
// The root may be gs:// or s3:// (through sinks/files): Publish then
// writes and hashes the directory locally, uploads its files, and replaces
// the index object whole. Objects appear only once complete, so the index
// still names only fully uploaded versions; an unindexed version prefix is
// cleared by the next publish of that version. Fetch downloads a version
// (checked against its hashes) for a reader that needs local files.
//
// # Behavior
//
// LatestGood, for --resume, walks the index from the newest version down,
// re-hashes each candidate and skips, with a warning naming the file and
// reason, any checkpoint whose files are missing, truncated or altered.
package checkpoint
