package kafkaio

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"

	"swerl/schemas"
)

func init() {
	register.Function1x1[Message, string](keyAndInstance)
	register.Function2x1[Message, func(Message), error](instanceToSample)
}

func needKcat(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("kcat is not installed (apt-get install kcat); CI=true requires the interop test to run")
		}
		t.Skip("kcat is not installed (apt-get install kcat): skipping the interop test")
	}
	return path
}

func keyAndInstance(m Message) string {
	in, err := Decode[schemas.Instance](m.Value, m.Source())
	if err != nil {
		return "error: " + err.Error()
	}
	return string(m.Key) + "=" + in.ID
}

// instanceToSample stands in for the train pipeline: one sample per
// instance, keyed by its group id.
func instanceToSample(m Message, emit func(Message)) error {
	in, err := Decode[schemas.Instance](m.Value, m.Source())
	if err != nil {
		return err
	}
	s := schemas.Sample{Rollout: schemas.Rollout{ID: in.ID + "/0", InstanceID: in.ID, GroupID: in.ID + "@v0", Completion: strings.Repeat("x", 500)}, Reward: 1}
	b, err := Encode(s)
	if err != nil {
		return err
	}
	emit(Message{Key: []byte(s.GroupID), Value: b})
	return nil
}

// Wire compatibility with a client nobody here wrote: kcat (librdkafka)
// produces zstd-compressed keyed instances to swerl.instances on the
// embedded broker, our Beam Read consumes and decodes them; our Write
// produces zstd batches to swerl.samples and kcat consumes them.
func TestKcatInterop(t *testing.T) {
	kcat := needKcat(t)
	b, err := StartBroker(BrokerOptions{Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := b.Config("")
	broker := b.Addrs()[0]

	const n = 50
	var in bytes.Buffer
	var want []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("acme/widgets#%d", i)
		v, err := Encode(schemas.Instance{ID: id, Repo: "acme/widgets", PRNumber: i, ProblemStatement: "fix it\tplease"})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&in, "%s|%s\n", id, v)
		want = append(want, id+"="+id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	prod := exec.CommandContext(ctx, kcat, "-P", "-b", broker, "-t", c.Topic(Instances), "-K", "|", "-z", "zstd")
	prod.Stdin = &in
	if out, err := prod.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}

	p, s := beam.NewPipelineWithRoot()
	msgs := Read(s, ReadConfig{Config: c, Topic: c.Topic(Instances), Bounded: true})
	passert.Equals(s, beam.ParDo(s, keyAndInstance, msgs), beamStrings(want)...)
	Write(s, WriteConfig{Config: c, Topic: c.Topic(Samples)}, beam.ParDo(s, instanceToSample, msgs))
	if err := runPipeline(t, ctx, p); err != nil {
		t.Fatal(err)
	}

	cons := exec.CommandContext(ctx, kcat, "-C", "-b", broker, "-t", c.Topic(Samples), "-o", "beginning", "-e", "-q", "-f", "%k|%p|%s\n")
	out, err := cons.Output()
	if err != nil {
		t.Fatalf("kcat -C: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != n {
		t.Fatalf("kcat consumed %d samples, want %d:\n%s", len(lines), n, out)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		parts := strings.SplitN(l, "|", 3)
		if len(parts) != 3 {
			t.Fatalf("kcat line %q", l)
		}
		smp, err := Decode[schemas.Sample]([]byte(parts[2]), "kcat partition "+parts[1])
		if err != nil {
			t.Fatal(err)
		}
		if parts[0] != smp.GroupID || smp.InstanceID+"@v0" != smp.GroupID {
			t.Errorf("sample %s under key %q", smp.ID, parts[0])
		}
		seen[smp.InstanceID] = true
	}
	if len(seen) != n {
		t.Fatalf("kcat saw samples of %d instances, want %d", len(seen), n)
	}
}

func beamStrings(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
