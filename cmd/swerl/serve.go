package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"swerl/gpu/policy"
	"swerl/gpu/serve"
	"swerl/sinks/metrics"
)

func init() {
	register(&command{name: "serve", summary: "serve a model or checkpoint as an OpenAI-compatible chat-completions API", run: runServe})
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "--model DIR [--addr 127.0.0.1:8000]", stderr)
	model := fs.String("model", "", "model directory, or an output root (serves its newest good checkpoint and reloads newer ones)")
	addr := fs.String("addr", "127.0.0.1:8000", "listen address (port 0 picks a free one)")
	name := fs.String("name", "", "model id reported by /v1/models (default: the directory's name)")
	device := fs.String("device", "cpu", "compute device: "+deviceNames())
	maxSeq := fs.Int("max-seq", 2048, "longest prompt+completion in tokens (sizes the KV cache)")
	maxTokens := fs.Int("max-tokens", 256, "completion length when a request gives no max_tokens")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus /metrics (process and Go runtime) here (\"\": off)")
	poll := fs.Duration("poll", 2*time.Second, "how often an output root is checked for a newer version (0: never)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" || fs.NArg() > 0 {
		return usagef("want --model DIR and no arguments")
	}
	if _, err := openBackend(*device); err != nil {
		return usagef("%v", err)
	}
	if *maxSeq < 2 || *maxTokens < 1 {
		return usagef("--max-seq ≥ 2 and --max-tokens ≥ 1, please")
	}
	p := *poll
	if p == 0 {
		p = -1
	}
	pol, err := policy.Open(*model, policy.Options{Device: *device, MaxSeq: *maxSeq, MaxTokens: *maxTokens, Poll: p,
		Log: slog.New(slog.NewTextHandler(stderr, nil))})
	if err != nil {
		return err
	}
	defer pol.Close()
	if *name == "" {
		abs, _ := filepath.Abs(*model)
		*name = filepath.Base(abs)
	}
	msrv, err := metrics.Serve(*metricsAddr)
	if err != nil {
		return err
	}
	if msrv != nil {
		defer msrv.Close()
		fmt.Fprintf(stderr, "metrics on http://%s/metrics\n", msrv.Addr)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: serve.New(pol, *name).Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "swerl serve: %s (weight version %d) on http://%s/v1\n", *model, pol.Version(), ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			return err
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}
