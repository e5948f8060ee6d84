package main

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// minePublisher returns the Beam sink that publishes mined instances
// (KV<id, JSON>) to the swerl.instances topic.
//
// TODO(3): wire swerl/sinks/kafkaio's Write here once it is on main.
func minePublisher(brokers string) (func(beam.Scope, beam.PCollection), error) {
	return nil, usagef("--brokers: the Kafka sink (sinks/kafkaio) is not in this build yet")
}
