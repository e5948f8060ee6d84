package kafkaio

import (
	"bytes"
	"encoding/base64"
	"regexp"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"google.golang.org/protobuf/proto"
)

// The job graph a runner receives (and Flink or Dataflow store and show)
// holds the name of the SASL password's environment variable, never the
// password: the pipeline with Read, Write and WriteAcked over a SASL
// config is marshalled as a runner would get it, and its bytes are
// searched for both.
func TestPasswordStaysOffTheJobGraph(t *testing.T) {
	const env, secret = "SWERL_TEST_GRAPH_PWD", "hunter2-do-not-ship"
	t.Setenv(env, secret)
	c := Config{Brokers: []string{"kafka.example:9093"}, TLS: TLSConfig{Enable: true},
		SASL: SASLConfig{Mechanism: "scram-sha-512", User: "swerl", PasswordEnv: env}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	p, s := beam.NewPipelineWithRoot()
	msgs := Read(s, ReadConfig{Config: c, Topic: c.Topic(Instances)})
	Write(s, WriteConfig{Config: c, Topic: c.Topic(Samples)}, msgs)
	WriteAcked(s, WriteConfig{Config: c, Topic: c.Topic(DeadLetter)}, msgs)
	edges, _, err := p.Build()
	if err != nil {
		t.Fatal(err)
	}
	model, err := graphx.Marshal(edges, &graphx.Options{Environment: &pipepb.Environment{Urn: "beam:env:docker:v1"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(model)
	if err != nil {
		t.Fatal(err)
	}
	b = unwrapBase64(b, 3)
	if !bytes.Contains(b, []byte(env)) {
		t.Fatalf("the job graph (%d bytes) does not name %s: the search cannot see the DoFns' configs", len(b), env)
	}
	if bytes.Contains(b, []byte(secret)) {
		t.Fatal("the SASL password is in the job graph")
	}
}

var base64Run = regexp.MustCompile(`[A-Za-z0-9+/]{32,}={0,2}`)

// unwrapBase64 appends to b the decoding of every base64 run in it, depth
// times over: the Go SDK stores a DoFn's fields as JSON inside a
// base64-encoded proto inside the transform's payload.
func unwrapBase64(b []byte, depth int) []byte {
	for range depth {
		var more []byte
		for _, run := range base64Run.FindAll(b, -1) {
			if d, err := base64.StdEncoding.DecodeString(string(run)); err == nil {
				more = append(more, d...)
			}
		}
		b = append(b, more...)
	}
	return b
}
