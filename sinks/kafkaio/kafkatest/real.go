package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"swerl/internal/testenv"
)

// The Kafka tests run against the embedded broker (kafkaio.StartBroker)
// unless $SWERL_KAFKA_BROKERS names a running Apache Kafka broker
// (scripts/kafka.sh start): then the tests that need a broker share that
// one, each with topics of its own (Prefix), and the tests that kill a
// broker start their own real one (StartReal).

// Shared returns the address of the real broker the tests share, or ""
// when they run against the embedded broker. A broker named but not
// answering fails the test: the real-broker leg was asked for.
func Shared(t testing.TB) string {
	t.Helper()
	addr := testenv.KafkaBrokers()
	if addr == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := waitReady(ctx, addr); err != nil {
		t.Fatalf("kafkatest: SWERL_KAFKA_BROKERS=%s: %v", addr, err)
	}
	return addr
}

// Prefix returns a topic prefix no other test uses ("t" and 12 hex digits
// and a dot), so tests can share one broker.
func Prefix(t testing.TB) string {
	b := make([]byte, 6)
	rand.Read(b)
	return "t" + hex.EncodeToString(b) + "."
}

// CreateTopics creates topics (full names) with partitions each on the
// broker at addr and waits until every partition's leader serves it.
func CreateTopics(t testing.TB, addr string, partitions int, topics ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := &kafka.Client{Addr: kafka.TCP(addr), Timeout: 30 * time.Second}
	req := &kafka.CreateTopicsRequest{}
	for _, n := range topics {
		req.Topics = append(req.Topics, kafka.TopicConfig{Topic: n, NumPartitions: partitions, ReplicationFactor: 1})
	}
	resp, err := cl.CreateTopics(ctx, req)
	if err != nil {
		t.Fatalf("kafkatest: create topics %v on %s: %v", topics, addr, err)
	}
	for n, e := range resp.Errors {
		if e != nil {
			t.Fatalf("kafkatest: create topic %s on %s: %v", n, addr, e)
		}
	}
	if !testenv.WaitFor(time.Minute, func() bool { return leaders(ctx, cl, topics, partitions) && served(ctx, addr, topics, partitions) }) {
		t.Fatalf("kafkatest: topics %v on %s: not every partition has a leader serving it after a minute", topics, addr)
	}
}

// leaders reports whether every one of the partitions of each topic has a
// leader.
func leaders(ctx context.Context, cl *kafka.Client, topics []string, partitions int) bool {
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil || len(md.Topics) != len(topics) {
		return false
	}
	for _, tp := range md.Topics {
		if tp.Error != nil || len(tp.Partitions) != partitions {
			return false
		}
		for _, p := range tp.Partitions {
			if p.Error != nil || p.Leader.Host == "" {
				return false
			}
		}
	}
	return true
}

// served reports whether the leader of every partition answers a request
// for its end offset. Under KRaft the metadata can name a leader before
// that broker has taken the partition up; a produce in between fails with
// Not Leader For Partition, and so does this request.
func served(ctx context.Context, addr string, topics []string, partitions int) bool {
	for _, topic := range topics {
		for p := range partitions {
			conn, err := kafka.DialLeader(ctx, "tcp", addr, topic, p)
			if err != nil {
				return false
			}
			_, err = conn.ReadLastOffset()
			conn.Close()
			if err != nil {
				return false
			}
		}
	}
	return true
}

// waitReady waits until the broker at addr answers a metadata request
// listing itself.
func waitReady(ctx context.Context, addr string) error {
	cl := &kafka.Client{Addr: kafka.TCP(addr), Timeout: 5 * time.Second}
	var last error
	for {
		md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{}})
		if err == nil && len(md.Brokers) > 0 {
			return nil
		}
		if err == nil {
			err = errors.New("the broker lists no brokers")
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Real is an Apache Kafka broker of one test's own, a process started by
// scripts/kafka.sh: a test can SIGKILL it and start it again on its data.
type Real struct {
	script     string
	dir        string
	partitions int
	addr       string
}

// StartReal starts a real broker whose config and data live in dir (a
// new cluster when dir is empty, the same cluster again when it holds
// one) and waits until it answers. Topics it creates on first use get
// partitions partitions (0: 4, as the embedded broker's default). The test's cleanup kills it. Without
// the jars (scripts/kafka.sh install) the test fails under CI and skips
// elsewhere.
func StartReal(t testing.TB, dir string, partitions int) *Real {
	t.Helper()
	script := filepath.Join(testenv.RepoRoot(t), "scripts", "kafka.sh")
	if _, err := exec.LookPath("java"); err != nil {
		testenv.Missing(t, "java (for the real Kafka broker)", "apt-get install -y openjdk-17-jre-headless && scripts/kafka.sh install")
	}
	if exec.Command("bash", script, "installed").Run() != nil {
		testenv.Missing(t, "Apache Kafka's jars", "scripts/kafka.sh install")
	}
	if partitions <= 0 {
		partitions = 4
	}
	r := &Real{script: script, dir: dir, partitions: partitions}
	t.Cleanup(func() { r.Kill() })
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	return r
}

// Addr is the broker's bootstrap address; it stays the same across
// restarts.
func (r *Real) Addr() string { return r.addr }

// Start starts the broker (again, after Kill) and waits until it answers.
// It does not stop the test, so a goroutine may call it.
func (r *Real) Start() error {
	out, err := r.run("start")
	if err != nil {
		return fmt.Errorf("kafkatest: %s start %s: %v\n%s", r.script, r.dir, err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	r.addr = lines[len(lines)-1]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := waitReady(ctx, r.addr); err != nil {
		return fmt.Errorf("kafkatest: the broker in %s on %s: %w", r.dir, r.addr, err)
	}
	return nil
}

// Kill SIGKILLs the broker (a crash; its data stays in dir) and returns
// once it is gone.
func (r *Real) Kill() error {
	if out, err := r.run("kill"); err != nil {
		return fmt.Errorf("kafkatest: kill the broker in %s: %v\n%s", r.dir, err, out)
	}
	return nil
}

func (r *Real) run(cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", r.script, cmd, r.dir)
	// The broker is killed when this test binary exits, even by a crash.
	c.Env = append(os.Environ(), "SWERL_KAFKA_OWNER="+strconv.Itoa(os.Getpid()), "SWERL_KAFKA_PARTITIONS="+strconv.Itoa(r.partitions))
	out, err := c.CombinedOutput()
	return string(out), err
}
