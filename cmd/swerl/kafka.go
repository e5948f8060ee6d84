package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"swerl/sinks/kafkaio"
)

// kafkaFlags are the Kafka connection flags of every subcommand that reads
// or writes swerl's topics.
type kafkaFlags struct {
	brokers, prefix                 string
	tls                             bool
	ca, cert, key                   string
	saslMechanism, saslUser, pwdEnv string
	partitions                      int
}

// addKafkaFlags registers the Kafka flags on fs.
func addKafkaFlags(fs *flag.FlagSet) *kafkaFlags {
	f := &kafkaFlags{}
	section(fs, "Kafka")
	defer endSection(fs)
	fs.StringVar(&f.brokers, "brokers", "", "Kafka bootstrap brokers host:port,… (none: start an embedded broker on loopback)")
	fs.BoolVar(&f.tls, "kafka-tls", false, "connect to the brokers with TLS (system roots unless --kafka-ca)")
	fs.StringVar(&f.ca, "kafka-ca", "", "PEM file of the CA that signed the brokers' certificates (implies --kafka-tls)")
	fs.StringVar(&f.cert, "kafka-cert", "", "PEM client certificate for TLS (with --kafka-key)")
	fs.StringVar(&f.key, "kafka-key", "", "PEM private key of --kafka-cert")
	fs.StringVar(&f.saslMechanism, "sasl-mechanism", "", "SASL authentication: plain, scram-sha-256 or scram-sha-512 (none by default)")
	fs.StringVar(&f.saslUser, "sasl-user", "", "SASL user name")
	fs.StringVar(&f.pwdEnv, "sasl-password-env", "", "name of the environment variable holding the SASL password")
	addTopicFlags(fs, &f.prefix, &f.partitions)
	return f
}

// config returns the Config the flags describe, without connecting.
func (f *kafkaFlags) config() (kafkaio.Config, error) {
	c := kafkaio.Config{TopicPrefix: f.prefix}
	if f.prefix == "" {
		c.TopicPrefix = "-" // an explicitly empty prefix: bare topic names
	}
	for _, b := range strings.Split(f.brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.Brokers = append(c.Brokers, b)
		}
	}
	c.TLS = kafkaio.TLSConfig{Enable: f.tls || f.ca != "" || f.cert != "", CAFile: f.ca, CertFile: f.cert, KeyFile: f.key}
	if (f.cert == "") != (f.key == "") {
		return c, usagef("--kafka-cert and --kafka-key go together")
	}
	if f.saslMechanism != "" {
		if f.saslUser == "" {
			return c, usagef("--sasl-mechanism needs --sasl-user")
		}
		if f.pwdEnv == "" {
			return c, usagef("--sasl-mechanism needs --sasl-password-env NAME (the password is read from the environment)")
		}
		// Checked here so that a missing variable fails at once; the config
		// carries only the name, and whoever connects (a Beam worker too)
		// reads the value.
		if _, ok := os.LookupEnv(f.pwdEnv); !ok {
			return c, usagef("--sasl-password-env %s: the variable is not set", f.pwdEnv)
		}
		c.SASL = kafkaio.SASLConfig{Mechanism: strings.ToLower(f.saslMechanism), User: f.saslUser, PasswordEnv: f.pwdEnv}
	} else if f.saslUser != "" || f.pwdEnv != "" {
		return c, usagef("--sasl-user and --sasl-password-env need --sasl-mechanism")
	}
	if f.partitions < 1 {
		return c, usagef("--partitions ≥ 1, please")
	}
	if len(c.Brokers) > 0 {
		if err := c.Validate(); err != nil {
			return c, usagef("%v", err)
		}
	}
	return c, nil
}

// connect returns the Kafka config to use. With no --brokers it starts an
// embedded broker on loopback (swerl's topics seeded), prints its address
// to stderr, and the returned func stops it; otherwise it makes sure
// swerl's topics exist on the cluster and the func does nothing.
func (f *kafkaFlags) connect(ctx context.Context, stderr io.Writer) (kafkaio.Config, func(), error) {
	c, err := f.config()
	if err != nil {
		return c, nil, err
	}
	if len(c.Brokers) == 0 {
		if c.TLS.Enable || c.SASL.Mechanism != "" {
			return c, nil, usagef("TLS and SASL flags need --brokers (the embedded broker speaks plain text)")
		}
		var topics []string
		for _, n := range kafkaio.TopicNames {
			topics = append(topics, c.Topic(n))
		}
		b, err := kafkaio.StartBroker(kafkaio.BrokerOptions{Partitions: f.partitions, Topics: topics})
		if err != nil {
			return c, nil, err
		}
		c.Brokers = b.Addrs()
		fmt.Fprintf(stderr, "embedded Kafka broker on %s (topics %s)\n", strings.Join(c.Brokers, ","), strings.Join(topics, ", "))
		return c, b.Close, nil
	}
	var topics []string
	for _, n := range kafkaio.TopicNames {
		topics = append(topics, c.Topic(n))
	}
	if err := kafkaio.EnsureTopics(ctx, c, f.partitions, topics...); err != nil {
		return c, nil, err
	}
	return c, func() {}, nil
}
