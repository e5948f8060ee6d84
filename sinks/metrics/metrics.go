// Package metrics serves swerl's Prometheus metrics and keeps the counts
// of swerl's Beam pipelines (Counter, CounterVec, Max: Beam metrics,
// Prometheus and the live progress line updated by one call; Namespace
// declares a pipeline's counts together; Read gets the totals back from a
// pipeline result).
//
// Every swerl metric is registered on Registry (prefix "swerl_"), together
// with the Go runtime and process collectors. Serve exposes it on /metrics;
// commands bind loopback by default (--metrics-addr), so a laptop run opens
// nothing to the network.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry holds every swerl metric.
var Registry = prometheus.NewRegistry()

// Factory registers new metrics on Registry, like promauto.With(Registry).
var Factory = factory{}

func init() {
	Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

type factory struct{}

// registered adds c to Registry and returns it.
func registered[C prometheus.Collector](c C) C {
	Registry.MustRegister(c)
	return c
}

func (factory) Counter(o prometheus.CounterOpts) prometheus.Counter {
	return registered(prometheus.NewCounter(o))
}

func (factory) CounterVec(o prometheus.CounterOpts, labels []string) *prometheus.CounterVec {
	return registered(prometheus.NewCounterVec(o, labels))
}

func (factory) Gauge(o prometheus.GaugeOpts) prometheus.Gauge {
	return registered(prometheus.NewGauge(o))
}

func (factory) GaugeVec(o prometheus.GaugeOpts, labels []string) *prometheus.GaugeVec {
	return registered(prometheus.NewGaugeVec(o, labels))
}

func (factory) Histogram(o prometheus.HistogramOpts) prometheus.Histogram {
	return registered(prometheus.NewHistogram(o))
}

// Server is a running /metrics endpoint.
type Server struct {
	Addr string // the address it listens on, with the real port
	srv  *http.Server
	done chan error
}

// Serve listens on addr ("127.0.0.1:0" picks a free port; "" serves
// nothing and returns a nil Server) and serves /metrics until Close.
func Serve(addr string) (*Server, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(Registry, promhttp.HandlerOpts{Registry: Registry}))
	s := &Server{Addr: ln.Addr().String(), srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, done: make(chan error, 1)}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server; a nil Server is fine.
func (s *Server) Close() error {
	if s == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if e := <-s.done; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	return err
}
