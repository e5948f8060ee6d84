package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"swerl/sinks/kafkaio"
)

// swerl broker serves the Kafka protocol to an ordinary client, with
// swerl's topics seeded under the given prefix, until its context ends.
func TestBrokerCommand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- runMain(ctx, []string{"broker", "--addr", "127.0.0.1:0", "--partitions", "3", "--topic-prefix", "t1."}, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	addr := strings.TrimSpace(line)
	c := kafkaio.Config{Brokers: []string{addr}, TopicPrefix: "t1."}
	parts, err := kafkaio.Partitions(ctx, c, "t1.samples")
	if err != nil || len(parts) != 3 {
		t.Fatalf("t1.samples partitions %v %v", parts, err)
	}
	w, err := kafkaio.NewWriter(kafkaio.WriteConfig{Config: kafkaio.Config{Brokers: []string{addr}}, Topic: "t1.weights", BatchTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("v1"), Value: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit code %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("broker did not stop on cancel")
	}
	if code := runMain(context.Background(), []string{"broker", "--partitions", "0"}, io.Discard, io.Discard); code != 2 {
		t.Fatalf("--partitions 0: exit %d, want 2", code)
	}
}

func TestKafkaFlags(t *testing.T) {
	t.Setenv("SWERL_TEST_PWD", "s3cret")
	for _, tc := range []struct {
		args []string
		want string // error substring, "" for success
	}{
		{[]string{"--brokers", "a:1,b:2", "--sasl-mechanism", "scram-sha-512", "--sasl-user", "u", "--sasl-password-env", "SWERL_TEST_PWD"}, ""},
		{[]string{"--brokers", "a:1", "--sasl-mechanism", "plain", "--sasl-user", "u"}, "sasl-password-env"},
		{[]string{"--brokers", "a:1", "--sasl-mechanism", "plain", "--sasl-user", "u", "--sasl-password-env", "SWERL_NOT_SET_X"}, "not set"},
		{[]string{"--brokers", "a:1", "--sasl-user", "u"}, "need --sasl-mechanism"},
		{[]string{"--brokers", "a:1", "--sasl-mechanism", "kerberos", "--sasl-user", "u", "--sasl-password-env", "SWERL_TEST_PWD"}, "unknown SASL"},
		{[]string{"--brokers", "nohostport"}, "host:port"},
		{[]string{"--kafka-cert", "c.pem"}, "go together"},
	} {
		fs := newFlags("x", "", io.Discard)
		kf := addKafkaFlags(fs)
		if err := parseFlags(fs, tc.args); err != nil {
			t.Fatal(err)
		}
		c, err := kf.config()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.args, err)
				continue
			}
			if len(c.Brokers) != 2 || c.SASL.PasswordEnv != "SWERL_TEST_PWD" || c.Topic("samples") != "swerl.samples" {
				t.Errorf("%q: %+v", tc.args, c)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
	// No --brokers: an embedded broker is started, announced, and stopped.
	fs := newFlags("x", "", io.Discard)
	kf := addKafkaFlags(fs)
	parseFlags(fs, []string{"--topic-prefix", ""})
	var msg strings.Builder
	c, stop, err := kf.connect(context.Background(), &msg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg.String(), c.Brokers[0]) || !strings.Contains(msg.String(), "deadletter") {
		t.Errorf("connect printed %q", msg.String())
	}
	if parts, err := kafkaio.Partitions(context.Background(), c, "instances"); err != nil || len(parts) != 4 {
		t.Errorf("bare topic instances on the embedded broker: %v %v", parts, err)
	}
	stop()
}
