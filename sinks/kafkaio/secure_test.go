package kafkaio

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// writeCA makes a CA and a server certificate for 127.0.0.1 signed by it;
// it returns the CA's PEM file and the server's TLS certificate.
func writeCA(t *testing.T, dir string) (string, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "swerl test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return caFile, tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
}

// Config's TLS (a CA file) and SASL (SCRAM-SHA-512) settings against a
// broker that requires both: EnsureTopics, a produce through Transport,
// and Scan through Dialer all work; wrong credentials and an unknown CA
// are refused.
func TestTLSAndSASL(t *testing.T) {
	caFile, srvCert := writeCA(t, t.TempDir())
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "swerl", "s3cret"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{srvCert}}),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	t.Setenv("SWERL_TEST_KAFKA_PWD", "s3cret")
	t.Setenv("SWERL_TEST_KAFKA_BAD_PWD", "wrong")
	c := Config{Brokers: cluster.ListenAddrs(), TLS: TLSConfig{Enable: true, CAFile: caFile},
		SASL: SASLConfig{Mechanism: "scram-sha-512", User: "swerl", PasswordEnv: "SWERL_TEST_KAFKA_PWD"}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := EnsureTopics(ctx, c, 2, c.Topic(Weights)); err != nil {
		t.Fatal(err)
	}
	if err := EnsureTopics(ctx, c, 2, c.Topic(Weights)); err != nil {
		t.Fatalf("EnsureTopics on an existing topic: %v", err)
	}
	if ps, err := Partitions(ctx, c, c.Topic(Weights)); err != nil || len(ps) != 2 {
		t.Fatalf("partitions %v %v", ps, err)
	}
	w, err := NewWriter(WriteConfig{Config: c, Topic: c.Topic(Weights), BatchTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("v1"), Value: []byte(`{"version":1}`)}, kafka.Message{Key: []byte("v2"), Value: []byte(`{"version":2}`)}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var keys []string
	if err := Scan(ctx, ReadConfig{Config: c, Topic: c.Topic(Weights)}, func(m Message) error {
		keys = append(keys, string(m.Key))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 {
		t.Fatalf("scanned %v", keys)
	}

	bad := c
	bad.SASL.PasswordEnv = "SWERL_TEST_KAFKA_BAD_PWD"
	short, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	if _, err := Partitions(short, bad, c.Topic(Weights)); err == nil {
		t.Error("a wrong SASL password was accepted")
	}
	noCA := c
	noCA.TLS.CAFile = "" // system roots do not know the test CA
	if _, err := Partitions(short, noCA, c.Topic(Weights)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a broker certificate from an unknown CA was accepted: %v", err)
	}
}

// FromLatest reads nothing that was there before; ToOffset bounds the read.
func TestScanPositions(t *testing.T) {
	c := startBroker(t, "in")
	tin := c.Topic("in")
	produce(t, c, tin, 0, 30)
	ctx := context.Background()
	n := 0
	count := func(Message) error { n++; return nil }
	if err := Scan(ctx, ReadConfig{Config: c, Topic: tin, FromLatest: true}, count); err != nil || n != 0 {
		t.Fatalf("FromLatest scanned %d, %v", n, err)
	}
	if err := Scan(ctx, ReadConfig{Config: c, Topic: tin, FromOffset: 2, ToOffset: 5}, count); err != nil {
		t.Fatal(err)
	}
	parts, _ := Partitions(ctx, c, tin)
	if n > 3*len(parts) || n == 0 {
		t.Fatalf("offsets [2,5) of %d partitions gave %d records", len(parts), n)
	}
	want := 0
	for _, p := range parts {
		conn, _ := kafka.DialLeader(ctx, "tcp", c.Brokers[0], tin, p)
		_, last, _ := conn.ReadOffsets()
		conn.Close()
		want += int(max(0, min(last, 5)-2))
	}
	if n != want {
		t.Fatalf("offsets [2,5): %d records, want %d", n, want)
	}
}
