// Package kafkaio is swerl's Kafka plane: topic names and connection
// settings (TLS, SASL) for real clusters, an embedded broker for a
// single-machine run, Beam Go transforms that read from and write to Kafka
// (Beam has no native Go Kafka IO), JSON encoding of swerl records as Kafka
// values, and the positions file that lets a pipeline resume after a
// restart.
//
// # Kafka
//
// Flags (every pipeline subcommand): --brokers host:port,… (none: an
// embedded broker on loopback is started and its address printed),
// --topic-prefix (default "swerl."), --kafka-tls, --kafka-ca, --kafka-cert,
// --kafka-key, --sasl-mechanism plain|scram-sha-256|scram-sha-512,
// --sasl-user and --sasl-password-env NAME (the password is read from the
// environment variable NAME, never from the command line).
//
// Embedded broker: franz-go's kfake, a real Kafka wire-protocol server in
// process, so kcat and any other client can talk to it. `swerl broker` runs
// one standalone until Ctrl-C. Data is in memory only.
//
// Topics: swerl.instances (key: instance id), swerl.samples (key: group id,
// so a group stays on one partition), swerl.weights (key: version),
// swerl.deadletter (key: the key of the failed record). Values are the JSON
// of the swerl records (package schemas) and record batches are compressed
// with zstd.
//
// Read is a splittable DoFn over (topic, partition) with an offset-range
// restriction. Bounded reads stop at the end offsets seen when the read
// starts; unbounded reads poll for new records and advance a watermark.
// Write flushes kafka-go's Writer at the end of every bundle, so a bundle
// is committed only once Kafka has acknowledged its records (at-least-once).
//
// Guarantees on restart: Prism keeps no durable checkpoint, so the pipeline
// records its own progress. A pipeline that passes the positions of the
// records it has finished (their output durable) to Ack gets them saved
// atomically in PositionsDir; Read with the same PositionsDir starts every
// partition at the first offset not acknowledged and skips offsets
// acknowledged out of order. Nothing acknowledged is read again, and nothing
// unacknowledged is skipped: after a crash, records in flight are read
// again, and the duplicates they produce are removed downstream by record id.
package kafkaio
