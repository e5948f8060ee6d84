package kafkaio

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// DefaultTopicPrefix is prepended to swerl's topic names unless a Config
// says otherwise.
const DefaultTopicPrefix = "swerl."

// Names of swerl's topics, without prefix.
const (
	Instances  = "instances"
	Samples    = "samples"
	Weights    = "weights"
	DeadLetter = "deadletter"
)

// TopicNames are swerl's four topics, without prefix.
var TopicNames = []string{Instances, Samples, Weights, DeadLetter}

// Config locates a Kafka cluster and how to talk to it: the one Kafka
// configuration of swerl, used by every reader and writer. It is plain
// data (Beam serialises it into DoFns as JSON, so it is part of the job
// graph): it holds no secret, only the name of the environment variable
// that holds the SASL password.
type Config struct {
	// Brokers are host:port bootstrap addresses.
	Brokers []string `json:"brokers"`
	// TopicPrefix is prepended to topic names by Topic; empty means
	// DefaultTopicPrefix. Use "-" for no prefix at all.
	TopicPrefix string      `json:"topic_prefix"`
	TLS         TLSConfig   `json:"tls"`
	SASL        SASLConfig  `json:"sasl"`
	Retry       RetryConfig `json:"retry"`
}

// TLSConfig enables TLS to the brokers. With Enable and no CAFile the system
// roots verify the brokers; CertFile and KeyFile give a client certificate.
type TLSConfig struct {
	Enable             bool   `json:"enable"`
	CAFile             string `json:"ca_file"`
	CertFile           string `json:"cert_file"`
	KeyFile            string `json:"key_file"`
	ServerName         string `json:"server_name"`
	InsecureSkipVerify bool   `json:"insecure_skip_verify"`
}

// SASLConfig authenticates to the brokers. Mechanism is "", "plain",
// "scram-sha-256" or "scram-sha-512".
type SASLConfig struct {
	Mechanism string `json:"mechanism"`
	User      string `json:"user"`
	// PasswordEnv names the environment variable that holds the password.
	// The value is read where a connection is made (on a Beam worker: in
	// the DoFn's Setup), so only the name travels in the job graph; every
	// worker needs the variable set.
	PasswordEnv string `json:"password_env"`
}

// password reads the SASL password from the environment.
func (s SASLConfig) password() (string, error) {
	if s.PasswordEnv == "" {
		return "", fmt.Errorf("kafkaio: SASL %s needs PasswordEnv, the name of the environment variable holding the password", s.Mechanism)
	}
	p, ok := os.LookupEnv(s.PasswordEnv)
	if !ok {
		return "", fmt.Errorf("kafkaio: SASL password: environment variable %s is not set in this process", s.PasswordEnv)
	}
	return p, nil
}

// Topic returns the full name of a swerl topic ("instances", "samples",
// "weights", "deadletter", or any other name): the prefix, then name.
func (c Config) Topic(name string) string {
	switch c.TopicPrefix {
	case "":
		return DefaultTopicPrefix + name
	case "-":
		return name
	}
	return c.TopicPrefix + name
}

// Validate checks that the config can be used to connect.
func (c Config) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("kafkaio: no brokers")
	}
	for _, b := range c.Brokers {
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			return fmt.Errorf("kafkaio: broker %q: want host:port", b)
		}
	}
	if _, err := c.mechanism(); err != nil {
		return err
	}
	return nil
}

func (c Config) tlsConfig() (*tls.Config, error) {
	t := c.TLS
	if !t.Enable {
		if t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" {
			return nil, errors.New("kafkaio: TLS files given but TLS is not enabled")
		}
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafkaio: TLS CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafkaio: TLS CA %s: no PEM certificate in the file", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("kafkaio: TLS client certificate needs both a cert and a key file")
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafkaio: TLS client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func (c Config) mechanism() (sasl.Mechanism, error) {
	s := c.SASL
	m := strings.ToLower(s.Mechanism)
	switch m {
	case "", "none":
		return nil, nil
	case "plain", "scram-sha-256", "scram-sha-512":
	default:
		return nil, fmt.Errorf("kafkaio: unknown SASL mechanism %q (want plain, scram-sha-256 or scram-sha-512)", s.Mechanism)
	}
	pwd, err := s.password()
	if err != nil {
		return nil, err
	}
	switch m {
	case "plain":
		return plain.Mechanism{Username: s.User, Password: pwd}, nil
	case "scram-sha-256":
		return scram.Mechanism(scram.SHA256, s.User, pwd)
	}
	return scram.Mechanism(scram.SHA512, s.User, pwd)
}

// security returns the TLS and SASL settings of the config.
func (c Config) security() (*tls.Config, sasl.Mechanism, error) {
	t, err := c.tlsConfig()
	if err != nil {
		return nil, nil, err
	}
	m, err := c.mechanism()
	return t, m, err
}

// Dialer returns a kafka-go Dialer with the config's TLS and SASL settings
// (for Conn, Reader).
func (c Config) Dialer() (*kafka.Dialer, error) {
	t, m, err := c.security()
	if err != nil {
		return nil, err
	}
	return &kafka.Dialer{Timeout: 10 * time.Second, DualStack: true, TLS: t, SASLMechanism: m, ClientID: "swerl"}, nil
}

// Transport returns a kafka-go Transport with the config's TLS and SASL
// settings (for Writer, Client).
func (c Config) Transport() (*kafka.Transport, error) {
	t, m, err := c.security()
	if err != nil {
		return nil, err
	}
	return &kafka.Transport{DialTimeout: 10 * time.Second, TLS: t, SASL: m, ClientID: "swerl", MetadataTTL: 5 * time.Second}, nil
}

// client returns a kafka-go Client for metadata and admin requests, and
// the func that closes its connections.
func (c Config) client() (*kafka.Client, func(), error) {
	tr, err := c.Transport()
	if err != nil {
		return nil, nil, err
	}
	return &kafka.Client{Addr: kafka.TCP(c.Brokers...), Transport: tr, Timeout: 30 * time.Second}, tr.CloseIdleConnections, nil
}

// EnsureTopics creates the named topics (full names, e.g. c.Topic(Samples))
// with the given number of partitions where they do not exist yet. Existing
// topics are left as they are. Replication factor is 1 on a single-broker
// cluster, else min(3, brokers).
func EnsureTopics(ctx context.Context, c Config, partitions int, names ...string) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if partitions <= 0 {
		partitions = 1
	}
	cl, done, err := c.client()
	if err != nil {
		return err
	}
	defer done()
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		return fmt.Errorf("kafkaio: metadata from %v: %w", c.Brokers, err)
	}
	have := map[string]bool{}
	for _, t := range md.Topics {
		if t.Error == nil {
			have[t.Name] = true
		}
	}
	repl := 1
	if n := len(md.Brokers); n > 1 {
		repl = min(3, n)
	}
	var req kafka.CreateTopicsRequest
	for _, n := range names {
		if !have[n] {
			req.Topics = append(req.Topics, kafka.TopicConfig{Topic: n, NumPartitions: partitions, ReplicationFactor: repl})
			have[n] = true
		}
	}
	if len(req.Topics) == 0 {
		return nil
	}
	res, err := cl.CreateTopics(ctx, &req)
	if err != nil {
		return fmt.Errorf("kafkaio: create topics: %w", err)
	}
	for name, e := range res.Errors {
		if e != nil && !errors.Is(e, kafka.TopicAlreadyExists) {
			return fmt.Errorf("kafkaio: create topic %s: %w", name, e)
		}
	}
	return nil
}

// ClusterID returns the cluster id the brokers report ("" if they report
// none).
func ClusterID(ctx context.Context, c Config) (string, error) {
	cl, done, err := c.client()
	if err != nil {
		return "", err
	}
	defer done()
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{}})
	if err != nil {
		return "", fmt.Errorf("kafkaio: metadata from %v: %w", c.Brokers, err)
	}
	return md.ClusterID, nil
}

// Partitions lists the partition ids of a topic.
func Partitions(ctx context.Context, c Config, topic string) ([]int, error) {
	cl, done, err := c.client()
	if err != nil {
		return nil, err
	}
	defer done()
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("kafkaio: metadata for %s: %w", topic, err)
	}
	for _, t := range md.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			// Not wrapped: Kafka calls an unknown topic temporary, but a
			// reader should not wait minutes for a topic nobody creates.
			return nil, fmt.Errorf("kafkaio: topic %s: %v", topic, t.Error)
		}
		ps := make([]int, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			ps = append(ps, p.ID)
		}
		sort.Ints(ps)
		return ps, nil
	}
	return nil, fmt.Errorf("kafkaio: topic %s not found", topic)
}

// source names a record as "topic@partition:offset".
func source(topic string, partition int, offset int64) string {
	return topic + "@" + strconv.Itoa(partition) + ":" + strconv.FormatInt(offset, 10)
}
