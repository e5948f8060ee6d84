package kafkaio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"swerl/schemas"
)

// Message is one Kafka record as it flows through a Beam pipeline. On a
// read it carries where it came from; on a write, an empty Topic means the
// writer's default topic and Partition and Offset are ignored (the key
// picks the partition).
type Message struct {
	Topic     string
	Partition int
	Offset    int64
	Key       []byte
	Value     []byte
	// TimeMS is the record timestamp in Unix milliseconds (0 on a write:
	// the time of the write).
	TimeMS int64
	// Origin optionally names the record this message was derived from
	// ("topic@partition:offset", the input's Source()). Write ignores it;
	// WriteAcked returns it once the message is durable, so AckOrigins can
	// acknowledge the input.
	Origin string
}

// Source names where the message was read: "topic@partition:offset".
func (m Message) Source() string { return source(m.Topic, m.Partition, m.Offset) }

// Position returns the message's position, for Ack.
func (m Message) Position() Position {
	return Position{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset}
}

// Time returns the record timestamp.
func (m Message) Time() time.Time { return time.UnixMilli(m.TimeMS) }

// Encode returns the Kafka value of a swerl record (schemas.Instance,
// Rollout, Sample, WeightVersion, DeadLetter, by value or pointer): its
// versioned JSON wire form. Other values are encoded as plain JSON.
func Encode(v any) ([]byte, error) {
	switch r := v.(type) {
	case schemas.Instance:
		return schemas.Encode(&r)
	case *schemas.Instance:
		return schemas.Encode(r)
	case schemas.Rollout:
		return schemas.Encode(&r)
	case *schemas.Rollout:
		return schemas.Encode(r)
	case schemas.Sample:
		return schemas.Encode(&r)
	case *schemas.Sample:
		return schemas.Encode(r)
	case schemas.WeightVersion:
		return schemas.Encode(&r)
	case *schemas.WeightVersion:
		return schemas.Encode(r)
	case schemas.DeadLetter:
		return schemas.Encode(&r)
	case *schemas.DeadLetter:
		return schemas.Encode(r)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: encode %T: %w", v, err)
	}
	return b, nil
}

// Decode parses a Kafka value into a T. For swerl records it applies
// schemas.Decode (schema_version checked, trailing data rejected); any other
// T is decoded as strict JSON (one value, nothing after it). The error names
// source, normally Message.Source() ("topic@partition:offset").
func Decode[T any](value []byte, source string) (T, error) {
	var v T
	var err error
	switch p := any(&v).(type) {
	case *schemas.Instance:
		err = schemas.Decode(value, p)
	case *schemas.Rollout:
		err = schemas.Decode(value, p)
	case *schemas.Sample:
		err = schemas.Decode(value, p)
	case *schemas.WeightVersion:
		err = schemas.Decode(value, p)
	case *schemas.DeadLetter:
		err = schemas.Decode(value, p)
	default:
		dec := json.NewDecoder(bytes.NewReader(value))
		if err = dec.Decode(p); err == nil && dec.More() {
			err = fmt.Errorf("trailing data after the JSON value")
		}
	}
	if err != nil {
		var zero T
		return zero, fmt.Errorf("kafkaio: %s: %w", source, err)
	}
	return v, nil
}

// DeadLetterFor builds the dead-letter record for a message that failed at
// stage with err.
func DeadLetterFor(m Message, stage string, err error) schemas.DeadLetter {
	return schemas.DeadLetter{
		SchemaVersion: schemas.Version,
		Stage:         stage,
		Source:        m.Source(),
		Key:           string(m.Key),
		Reason:        err.Error(),
		Value:         m.Value,
		CreatedAt:     time.Now().UTC().Format(time.RFC3339Nano),
	}
}
