package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"swerl/gpu/learner"
	"swerl/gpu/modeldir"
)

// A learner's refusal of an output root with versions gets the flags that
// address it; other errors pass as they are.
func TestFlagHint(t *testing.T) {
	err := flagHint(fmt.Errorf("learner: out: %w", learner.ErrPublished))
	if !errors.Is(err, learner.ErrPublished) || !strings.Contains(err.Error(), "--resume") || !strings.Contains(err.Error(), "--out") {
		t.Errorf("hint: %v", err)
	}
	err = flagHint(fmt.Errorf("modeldir: a: %w", modeldir.ErrNoLocalBase))
	if !errors.Is(err, modeldir.ErrNoLocalBase) || !strings.Contains(err.Error(), "swerl model merge --base") {
		t.Errorf("hint: %v", err)
	}
	other := errors.New("x")
	if flagHint(other) != other || flagHint(nil) != nil {
		t.Error("other errors must pass unchanged")
	}
}

// $SWERL_OPENAI_MODEL fills an http(s) spec's model, never overrides one,
// and leaves other specs alone.
func TestPolicyFromEnv(t *testing.T) {
	t.Setenv(openAIModelEnv, "")
	if got := policyFromEnv("http://h:1/v1"); got != "http://h:1/v1" {
		t.Errorf("unset: %q", got)
	}
	t.Setenv(openAIModelEnv, "qwen")
	for in, want := range map[string]string{
		"http://h:1/v1":              "http://h:1/v1?model=qwen",
		"http://h:1/v1?model=mine":   "http://h:1/v1?model=mine",
		"http://a/v1,http://b/v1?n=": "http://a/v1,http://b/v1?model=qwen&n=",
		"file:c.jsonl":               "file:c.jsonl",
		"model:/m":                   "model:/m",
	} {
		if got := policyFromEnv(in); got != want {
			t.Errorf("policyFromEnv(%q) = %q, want %q", in, got, want)
		}
	}
}
