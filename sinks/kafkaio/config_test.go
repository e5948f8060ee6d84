package kafkaio

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTopic(t *testing.T) {
	for _, tc := range []struct{ prefix, want string }{
		{"", "swerl.samples"}, {"run7.", "run7.samples"}, {"-", "samples"},
	} {
		if got := (Config{TopicPrefix: tc.prefix}).Topic(Samples); got != tc.want {
			t.Errorf("prefix %q: %s, want %s", tc.prefix, got, tc.want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o644)
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{}, "no brokers"},
		{Config{Brokers: []string{"localhost"}}, "host:port"},
		{Config{Brokers: []string{"h:1"}, SASL: SASLConfig{Mechanism: "gssapi"}}, "unknown SASL mechanism"},
		{Config{Brokers: []string{"h:1"}, SASL: SASLConfig{Mechanism: "plain", User: "u"}}, "needs PasswordEnv"},
		{Config{Brokers: []string{"h:1"}, SASL: SASLConfig{Mechanism: "plain", User: "u", PasswordEnv: "SWERL_TEST_UNSET_PWD"}}, "SWERL_TEST_UNSET_PWD is not set"},
	} {
		if err := tc.c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
	for _, tc := range []struct {
		tls  TLSConfig
		want string
	}{
		{TLSConfig{Enable: true, CAFile: notPEM}, "no PEM certificate"},
		{TLSConfig{Enable: true, CAFile: filepath.Join(dir, "missing.pem")}, "no such file"},
		{TLSConfig{Enable: true, CertFile: notPEM}, "both a cert and a key"},
		{TLSConfig{CAFile: notPEM}, "not enabled"},
	} {
		c := Config{Brokers: []string{"h:1"}, TLS: tc.tls}
		if _, err := c.Dialer(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: dialer %v, want %q", tc.tls, err, tc.want)
		}
		if _, err := c.Transport(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: transport %v, want %q", tc.tls, err, tc.want)
		}
	}
	t.Setenv("SWERL_TEST_KAFKA_PWD", "p")
	for _, m := range []string{"plain", "SCRAM-SHA-256", "scram-sha-512"} {
		c := Config{Brokers: []string{"h:1"}, SASL: SASLConfig{Mechanism: m, User: "u", PasswordEnv: "SWERL_TEST_KAFKA_PWD"}}
		d, err := c.Dialer()
		if err != nil || d.SASLMechanism == nil {
			t.Errorf("%s: %v", m, err)
		}
		tr, err := c.Transport()
		if err != nil || tr.SASL == nil || !strings.EqualFold(tr.SASL.Name(), m) {
			t.Errorf("%s: transport %v", m, err)
		}
	}
	d, err := Config{Brokers: []string{"h:1"}, TLS: TLSConfig{Enable: true}}.Dialer()
	if err != nil || d.TLS == nil || d.TLS.RootCAs != nil {
		t.Errorf("TLS with system roots: %+v %v", d, err)
	}
}
