//go:build tools

// This file pins the design card's dependencies in go.mod (Beam, kafka-go,
// parquet-go, client_golang, and the embedded broker) at exact versions, even
// before or after a refactor leaves one of them briefly unimported.
package swerl

import (
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam"
	_ "github.com/parquet-go/parquet-go"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/segmentio/kafka-go"
	_ "github.com/twmb/franz-go/pkg/kfake"
)
