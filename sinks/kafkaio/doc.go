// Package kafkaio is swerl's Kafka plane: topic names and connection
// settings (TLS, SASL) for real clusters, an embedded broker for a
// single-machine run, Beam Go transforms that read from and write to Kafka
// (Beam has no native Go Kafka IO), JSON encoding of swerl records as Kafka
// values, the positions files that let a pipeline resume after a restart,
// and Scan/Replay to re-read a topic without Beam.
//
// # Kafka
//
// Flags (every subcommand that talks to Kafka): --brokers host:port,…
// (none: an embedded broker is started on loopback and its address
// printed), --topic-prefix (default "swerl."; "" for bare names),
// --partitions (of topics swerl creates), --kafka-tls, --kafka-ca,
// --kafka-cert, --kafka-key, --sasl-mechanism plain|scram-sha-256|scram-sha-512,
// --sasl-user and --sasl-password-env NAME (the password is read from the
// environment variable NAME, never from the command line; only the name
// is in Config, so only the name travels in a Beam job graph, and each
// worker reads the value when it connects). On a real cluster swerl
// creates its four topics if they are missing.
//
// Embedded broker: franz-go's kfake, a real Kafka wire-protocol server in
// the swerl process, so kcat and any other Kafka client can talk to it
// (a test drives kcat against it, zstd both ways). `swerl broker
// [--addr 127.0.0.1:9092]` runs one standalone until Ctrl-C. Its data
// lives in memory, unless --data-dir DIR keeps it on disk: a broker
// started again with the same --data-dir and --addr is the same cluster,
// as a restarted Kafka broker is.
//
// Topics: <prefix>instances (key: instance id), <prefix>samples (key:
// group id, so a group stays on one partition), <prefix>weights (key:
// version), <prefix>deadletter (key: the key of the failed record). Values
// are the JSON of the swerl records (package schemas, with
// schema_version); Decode checks them and names the record
// ("topic@partition:offset") in every error. Every producer of swerl is a
// Writer (NewWriter): zstd batches, acks from all in-sync replicas, and
// partitions chosen by a murmur2 hash of the key exactly as the Java
// client (and librdkafka's murmur2 partitioner) does.
//
// Broker outages: reads (every fetch, and listing the partitions when a
// read starts) and writes retry network failures and the errors Kafka
// marks temporary, waiting 100ms doubling up to Config.Retry.Ceiling
// (default 10s) for up to Config.Retry.Budget (default 5 minutes) after
// the first failure, and log every try; so a broker restart or a rolling
// upgrade only pauses a pipeline. Authentication, certificate and size
// errors fail at once.
//
// `swerl replay --topic T [--from-offset N | --from-time T] [--to-offset N
// | --to-time T] --out DIR [--rescore --instances FILE]` re-reads a topic
// into Parquet (DIR/samples/, DIR/instances/, DIR/weights/, DIR/raw/),
// undecodable records to DIR/deadletter/ with the reason; --rescore scores
// samples again with the current reward and recomputes group advantages.
//
// # Beam
//
// Read is a splittable DoFn over (topic, partition) with an offset-range
// restriction. Bounded reads (ReadConfig.Bounded, ToOffset or ToTime) stop
// at the end offsets seen when the read starts and produce a bounded
// PCollection, so the pipeline ends when the input is exhausted. Unbounded
// reads poll idle partitions (PollInterval), checkpoint themselves every
// 500ms so downstream stages see their output, and advance a watermark
// estimator to the record timestamps, or to now less one second when
// caught up. Elements carry the record timestamp as event time.
//
// Write buffers a bundle's records and flushes kafka-go's Writer at the end
// of the bundle (never in Teardown): a bundle succeeds only once Kafka has
// acknowledged all its records, and a failed flush fails the bundle, which
// the runner retries. Records of one key keep their partition; their order
// across retried bundles is not guaranteed. WriteAcked also returns each
// written message after its flush. Sinks end in Drain: on Prism v2.77 a
// fused stage with no output busy-spins a core while its bundles run.
//
// # Restart guarantees
//
// Prism keeps no durable checkpoint, so the pipeline records its own
// progress in positions files (PositionsDir, one JSON file a topic,
// replaced atomically). Read records where it starts each partition; Ack
// (or AckOrigins on WriteAcked's output, through Message.Origin) marks
// records finished, and must be applied only once everything derived from
// a record is durable (written and flushed, or dead-lettered). A file
// holds, per partition, the first offset not acknowledged (next) and the
// offsets acknowledged out of order above it. A Read with the same
// PositionsDir starts at next and skips those offsets. Hence: no record
// that was acknowledged is read again, and no record that was not
// acknowledged is skipped (at-least-once). Records in flight when a
// pipeline stops are read again after the restart; the outputs they
// produce twice are removed downstream by record id (the train pipeline's
// sample sink dedups by sample id). Positions are per process and
// filesystem: runners that run bundles on many machines need PositionsDir
// on a shared filesystem, and two pipelines must not share one
// PositionsDir for the same topic.
//
// # Consumer groups
//
// Processes that share a topic's records and come and go while they run
// (rollout workers) read it as members of a Kafka consumer group instead:
// JoinGroup starts a member (kafka-go's ConsumerGroup: JoinGroup,
// SyncGroup, Heartbeat, OffsetFetch, OffsetCommit, LeaveGroup, all served
// by the embedded broker too), Read with ReadConfig.GroupMember emits the
// records of the partitions the group assigns it, and AckGroup /
// AckOriginsGroup acknowledge them. Each partition starts at the group's
// committed offset; a partition's offset is committed only up to its first
// record handed out and not yet acknowledged, so a commit never passes a
// record whose output is not durable. In a rebalance a member stops
// handing out records of the partitions it loses, waits (DrainTimeout)
// for those in flight to be acknowledged, commits them, and only then
// joins again, so the next owner starts after them. A member that dies
// (SIGKILL) loses its partitions when its session expires, and their next
// owners read again what it had not committed: at-least-once, with the
// copies removed downstream by record id, as after a restart. The member
// lives in the process that joined: the read and the acknowledgements
// must run there (Prism's loopback workers do). Close commits what is
// acknowledged and leaves the group, handing its partitions over at once.
package kafkaio
