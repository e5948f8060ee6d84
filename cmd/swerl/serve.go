package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"swerl/gpu"
	"swerl/gpu/peft"
	"swerl/gpu/policy"
	"swerl/gpu/serve"
	"swerl/sinks/metrics"
)

func init() {
	register(&command{name: "serve", summary: "serve a model or checkpoint as an OpenAI-compatible API, loading LoRA adapters and weights as vLLM and SGLang do", run: runServe})
}

// mergePEFT is swerl serve's adapter loader: the PEFT folder dir (checked
// against the base's shapes) merged into a copy of base.
func mergePEFT(base *gpu.Model, dir string) (*gpu.Model, error) {
	a, err := peft.ReadFor(dir, base.Config)
	if err != nil {
		return nil, err
	}
	m, err := serve.CopyModel(base)
	if err != nil {
		return nil, err
	}
	return m, peft.Merge(m, a)
}

// serveGrace is how long swerl serve lets requests in flight finish after
// SIGINT or SIGTERM (within main's shutdownGrace).
const serveGrace = 3 * time.Second

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "--model DIR [--addr 127.0.0.1:8000]", stderr)
	model := fs.String("model", "", "model directory, or an output root (serves its newest good checkpoint and reloads newer ones)")
	addr := fs.String("addr", "127.0.0.1:8000", "listen address (port 0 picks a free one)")
	name := fs.String("name", "", "model id reported by /v1/models (default: the directory's name)")
	device := fs.String("device", "cpu", "compute device: "+deviceNames())
	maxSeq := new(int)
	addMaxSeqFlag(fs, maxSeq, 2048, "swerl serve's default sizes its KV cache for longer requests; a longer one is refused, and /v1/models and /tokenize report it as max_model_len")
	maxTokens := fs.Int("max-tokens", 256, "completion length when a request gives no max_tokens")
	metricsAddr := new(string)
	addMetricsFlag(fs, metricsAddr, "", "swerl serve's default is off, since it faces clients; its /metrics has the process and Go runtime")
	poll := fs.Duration("poll", policy.DefaultPoll, "how often an output root's index is checked for a newer version (0: never); hashes are verified only when its newest row changes")
	readTimeout := fs.Duration("read-timeout", serve.DefaultReadTimeout, "time to read a request's headers and body; a connection that stalls longer is closed")
	writeTimeout := fs.Duration("write-timeout", serve.DefaultWriteTimeout, "time from a request's headers to the end of its response, queueing and generation included")
	idleTimeout := fs.Duration("idle-timeout", serve.DefaultIdleTimeout, "how long an idle keep-alive connection stays open")
	maxConcurrent := fs.Int("max-concurrent", serve.DefaultMaxConcurrent, "completions computed at once")
	maxQueue := fs.Int("max-queue", serve.DefaultMaxQueue, "requests waiting beyond --max-concurrent; more are answered 429 with Retry-After")
	maxBody := fs.Int64("max-body", 4<<20, "largest request body in bytes (413 beyond)")
	maxAdapters := fs.Int("max-adapters", serve.DefaultMaxAdapters, "LoRA adapters loaded at once through /v1/load_lora_adapter or /load_lora_adapter (400 beyond)")
	maxMerged := fs.Int("max-merged", serve.DefaultMaxMerged, "base+adapter merged models kept in memory (each a copy of the base); the least recently used is merged again when asked for")
	hideAdapters := fs.Bool("hide-adapters", false, "list only the base model on /v1/models, not the LoRA adapters loaded (as older SGLang does; requests still name them): for testing workers that follow the weights topic")
	bf16 := fs.Bool("bf16-weights", false, "round every weight served to bfloat16, as an engine serving a bf16 copy of a float32 trainer does (a real sampler–trainer mismatch for testing --rollout-correction)")
	apiKeyEnv := fs.String("api-key-env", "", "name of an environment variable holding an API key: requests then need \"Authorization: Bearer <key>\" (401 otherwise; /health stays open)")
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
	if *maxConcurrent < 1 || *maxQueue < 0 || *maxBody < 1 || *readTimeout <= 0 || *writeTimeout <= 0 || *idleTimeout <= 0 || *maxAdapters < 1 || *maxMerged < 1 {
		return usagef("--max-concurrent ≥ 1, --max-queue ≥ 0, --max-body ≥ 1, --max-adapters ≥ 1, --max-merged ≥ 1 and positive timeouts, please")
	}
	var apiKey string
	if *apiKeyEnv != "" {
		if apiKey = os.Getenv(*apiKeyEnv); apiKey == "" {
			return usagef("--api-key-env %s: the variable is not set or empty", *apiKeyEnv)
		}
	}
	popts := policy.Options{Device: *device, MaxSeq: *maxSeq, MaxTokens: *maxTokens, Poll: *poll, BF16Weights: *bf16, Log: slog.New(slog.NewTextHandler(stderr, nil))}
	pol, err := policy.Open(*model, popts)
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
	sv := serve.New(pol, *name)
	sv.MaxConcurrent, sv.MaxQueue, sv.MaxBody, sv.APIKey = *maxConcurrent, *maxQueue, *maxBody, apiKey
	sv.ReadTimeout, sv.WriteTimeout, sv.IdleTimeout = *readTimeout, *writeTimeout, *idleTimeout
	// Adapters pushed by a weight sync are PEFT folders, merged into a copy
	// of the base; merged models and update_weights_from_disk's weights
	// never reload on their own.
	sv.LoadAdapter, sv.MaxAdapters, sv.MaxMerged, sv.HideAdapters = mergePEFT, *maxAdapters, *maxMerged, *hideAdapters
	sv.PolicyOptions = popts
	sv.PolicyOptions.Poll = -1
	srv := sv.HTTPServer()
	auth := "no API key"
	if apiKey != "" {
		auth = "API key from $" + *apiKeyEnv
	}
	fmt.Fprintf(stderr, "swerl serve: %s (weight version %d) on http://%s/v1 (%s)\n", *model, pol.Version(), ln.Addr(), auth)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// Requests in flight get a few seconds to finish (a stream can
		// run for minutes); then their connections are closed, which
		// cancels their contexts and so their generation.
		sctx, cancel := context.WithTimeout(context.Background(), serveGrace)
		defer cancel()
		if err := srv.Shutdown(sctx); errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintf(stderr, "swerl serve: requests still running %s after the interrupt; closing their connections\n", serveGrace)
			srv.Close()
		} else if err != nil {
			return err
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}
