package mine

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"swerl/sinks/kafkaio"
)

func init() {
	register.Function2x1(toMessage)
}

// toMessage keys an instance's JSON by its id, so every version of one
// instance lands on one partition.
func toMessage(id string, value []byte) kafkaio.Message {
	return kafkaio.Message{Key: []byte(id), Value: value}
}

// PublishKafka returns a Config.Publish that produces each kept instance
// (key: id, value: JSON wire form) to wc.Topic, e.g. the swerl.instances
// topic of wc.Config.
func PublishKafka(wc kafkaio.WriteConfig) func(s beam.Scope, instances beam.PCollection) {
	return func(s beam.Scope, instances beam.PCollection) {
		s = s.Scope("mine.PublishKafka")
		kafkaio.Write(s, wc, beam.ParDo(s, toMessage, instances))
	}
}
