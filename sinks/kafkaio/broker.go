package kafkaio

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kfake"
)

// BrokerOptions configures an embedded broker.
type BrokerOptions struct {
	// Addr is the listen address; default "127.0.0.1:0" (a free port).
	Addr string
	// Partitions of every seeded and auto-created topic; default 4.
	Partitions int
	// Topics are seeded at start (full names). Default: swerl's four topics
	// with TopicPrefix.
	Topics []string
	// TopicPrefix for the default topics; see Config.TopicPrefix.
	TopicPrefix string
	// DataDir, when set, keeps the broker's data (topics, records,
	// committed offsets, the cluster id) on disk there: a broker started
	// again with the same DataDir and Addr is the same cluster, as a
	// restarted Kafka broker is. Without it the data lives in memory.
	DataDir string
}

// Broker is an in-process Kafka broker speaking the real wire protocol
// (franz-go's kfake): any Kafka client (kafka-go, kcat, librdkafka, the
// Java client) can produce to it and consume from it. Data lives in memory
// and is lost on Close, unless BrokerOptions.DataDir keeps it. Topics that
// are not seeded are created on first use.
type Broker struct {
	c     *kfake.Cluster
	addrs []string
}

// StartBroker starts an embedded broker.
func StartBroker(o BrokerOptions) (*Broker, error) {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.Partitions <= 0 {
		o.Partitions = 4
	}
	if o.Topics == nil {
		c := Config{TopicPrefix: o.TopicPrefix}
		for _, n := range TopicNames {
			o.Topics = append(o.Topics, c.Topic(n))
		}
	}
	addr := o.Addr
	id := make([]byte, 8)
	rand.Read(id)
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		// Every embedded broker is a new cluster (its data is gone when it
		// stops): positions saved against an earlier one are not reused.
		kfake.ClusterID("swerl-embedded-" + hex.EncodeToString(id)),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(o.Partitions),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, addr) }),
	}
	if len(o.Topics) > 0 {
		opts = append(opts, kfake.SeedTopics(int32(o.Partitions), o.Topics...))
	}
	if o.DataDir != "" {
		// The cluster id saved there overrides the new one above.
		opts = append(opts, kfake.DataDir(o.DataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: embedded broker on %s: %w", o.Addr, err)
	}
	return &Broker{c: c, addrs: c.ListenAddrs()}, nil
}

// Addrs returns the broker's host:port addresses.
func (b *Broker) Addrs() []string { return append([]string(nil), b.addrs...) }

// Config returns a Config that connects to this broker with the given prefix.
func (b *Broker) Config(topicPrefix string) Config {
	return Config{Brokers: b.Addrs(), TopicPrefix: topicPrefix}
}

// Close stops the broker; its data is gone unless it has a DataDir.
func (b *Broker) Close() { b.c.Close() }
