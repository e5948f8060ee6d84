package metrics

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestServeExposesRegisteredMetrics(t *testing.T) {
	c := Factory.Counter(prometheus.CounterOpts{Name: "swerl_test_things_total", Help: "things"})
	c.Add(3)
	s, err := Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Get("http://" + s.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "swerl_test_things_total 3") {
		t.Fatalf("counter missing from /metrics:\n%.500s", body)
	}
	if !strings.Contains(string(body), "go_goroutines") {
		t.Fatal("runtime collector missing")
	}
}

func TestServeEmptyAddrServesNothing(t *testing.T) {
	s, err := Serve("")
	if err != nil || s != nil {
		t.Fatalf("Serve(\"\") = %v, %v", s, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
