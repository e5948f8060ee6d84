// Package rollout asks a policy for the G completions of each prompt.
//
// A Policy is anything that turns a chat prompt into completions: an
// OpenAI-compatible server ("http://…", "https://…"), recorded completions
// ("file:PATH.jsonl"), or the in-process model ("model:DIR", registered by
// gpu/policy). Open picks the implementation by the spec's scheme; packages
// add schemes with RegisterScheme from their init functions, so the default
// build pulls in no model code it does not need.
package rollout

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Request is one prompt to complete N times.
type Request struct {
	InstanceID string // the instance the prompt was built from (file policies key on it)
	System     string // system prompt; empty for none
	Prompt     string // user message
	N          int    // completions wanted (the group size)
	// Sampling; zero values mean the policy's defaults.
	MaxTokens   int
	Temperature float64
	TopP        float64
	Seed        int64
	// Greedy asks for the most likely token at every step (OpenAI's
	// temperature 0); Temperature and TopP are then ignored. A zero
	// Temperature is the policy's default temperature, not greedy.
	Greedy bool
}

// Completion is one answer of the policy.
type Completion struct {
	Text         string
	Tokens       []int32   // completion token ids, when the policy reports them
	PromptTokens []int32   // prompt token ids, when the policy reports them
	LogProbs     []float32 // per-token log-probabilities of Tokens under the sampling policy
	FinishReason string    // "stop", "length", …
	// LogProbsProcessed says LogProbs are of the processed distribution
	// (softmax(logits/temperature)) rather than the raw one (temperature
	// 1); see the HTTP policy's logprobs option.
	LogProbsProcessed bool
}

// Response is the answer to one Request.
type Response struct {
	Completions []Completion
	// PolicyVersion is the weight version that produced the completions, as
	// the policy reports it (-1 when unknown).
	PolicyVersion int64
	LatencyMS     int64
}

// Policy completes prompts. Implementations are safe for concurrent use.
type Policy interface {
	Complete(ctx context.Context, req Request) (Response, error)
	// Version is the weight version new requests will be served by (-1 when
	// unknown).
	Version() int64
	Close() error
}

// Opener builds a Policy from a spec such as "file:/tmp/c.jsonl".
type Opener func(spec string) (Policy, error)

var (
	mu      sync.RWMutex
	schemes = map[string]Opener{}
)

// RegisterScheme makes Open accept specs "scheme:…". It panics on a
// duplicate scheme, which is a programming error.
func RegisterScheme(scheme string, open Opener) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := schemes[scheme]; dup {
		panic("rollout: scheme registered twice: " + scheme)
	}
	schemes[scheme] = open
}

// Schemes lists the registered schemes, sorted.
func Schemes() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(schemes))
	for s := range schemes {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Open returns the Policy a spec names; the error lists the schemes known.
// opts configure an http(s) policy (OpenHTTP); other schemes take none.
func Open(spec string, opts ...Option) (Policy, error) {
	scheme, _, ok := strings.Cut(spec, ":")
	if !ok {
		return nil, fmt.Errorf("rollout: policy %q has no scheme (want one of %s)", spec, strings.Join(Schemes(), ", "))
	}
	mu.RLock()
	open := schemes[scheme]
	mu.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("rollout: policy %q: unknown scheme %q (want one of %s)", spec, scheme, strings.Join(Schemes(), ", "))
	}
	if len(opts) > 0 && (scheme == "http" || scheme == "https") {
		return openHTTP(spec, opts...)
	}
	return open(spec)
}
