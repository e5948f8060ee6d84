package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"swerl/sinks/kafkaio"
)

func init() {
	register(&command{name: "broker", summary: "run an embedded Kafka broker (real wire protocol, in memory or --data-dir) until Ctrl-C", run: runBroker})
}

func runBroker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("broker", "[--addr 127.0.0.1:9092] [--partitions N] [--topic-prefix P] [--data-dir DIR]", stderr)
	addr := fs.String("addr", "127.0.0.1:9092", "listen address (port 0: any free port)")
	var prefix string
	var partitions int
	addTopicFlags(fs, &prefix, &partitions)
	dataDir := fs.String("data-dir", "", "keep the broker's data in this directory, so that a broker started again with it (and the same --addr) continues where this one stopped (default: in memory only)")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if partitions < 1 {
		return usagef("--partitions ≥ 1, please")
	}
	c := kafkaio.Config{TopicPrefix: prefix}
	if prefix == "" {
		c.TopicPrefix = "-"
	}
	var topics []string
	for _, n := range kafkaio.TopicNames {
		topics = append(topics, c.Topic(n))
	}
	b, err := kafkaio.StartBroker(kafkaio.BrokerOptions{Addr: *addr, Partitions: partitions, Topics: topics, DataDir: *dataDir})
	if err != nil {
		return err
	}
	defer b.Close()
	addrs := strings.Join(b.Addrs(), ",")
	where := "in memory"
	if *dataDir != "" {
		where = "data in " + *dataDir
	}
	fmt.Fprintf(stderr, "Kafka broker (embedded, %s) on %s; topics %s (%d partitions); Ctrl-C stops it\n", where, addrs, strings.Join(topics, ", "), partitions)
	fmt.Fprintln(stdout, addrs)
	<-ctx.Done()
	fmt.Fprintln(stderr, "broker stopped")
	return nil
}
