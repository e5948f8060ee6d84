package rollout

import (
	"context"
	"strings"
	"sync"
	"testing"
)

type echo struct{ spec string }

func (e echo) Complete(_ context.Context, r Request) (Response, error) {
	out := Response{PolicyVersion: -1}
	for range r.N {
		out.Completions = append(out.Completions, Completion{Text: e.spec + ":" + r.Prompt})
	}
	return out, nil
}
func (echo) Version() int64 { return -1 }
func (echo) Close() error   { return nil }

var registerEcho sync.Once

func TestOpenPicksTheScheme(t *testing.T) {
	// Registered once per process, so the test runs again under -count.
	registerEcho.Do(func() {
		RegisterScheme("echo-test", func(spec string) (Policy, error) { return echo{spec}, nil })
	})
	p, err := Open("echo-test:x")
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.Complete(context.Background(), Request{Prompt: "hi", N: 2})
	if err != nil || len(r.Completions) != 2 || r.Completions[1].Text != "echo-test:x:hi" {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []string{"nocolon", "nope:x"} {
		if _, err := Open(bad); err == nil || !strings.Contains(err.Error(), "echo-test") {
			t.Errorf("Open(%q) error %v should list the known schemes", bad, err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a duplicate scheme must panic")
		}
	}()
	RegisterScheme("echo-test", nil)
}
