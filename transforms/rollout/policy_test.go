package rollout

import (
	"context"
	"strings"
	"sync"
	"testing"

	"swerl/internal/engineapi"
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

// Greedy decoding is asked for by name: a Greedy request sends OpenAI's
// temperature 0, whatever its Temperature; a zero Temperature without
// Greedy sends none (the engine's default), never 0.
func TestHTTPGreedyIsExplicit(t *testing.T) {
	p, err := OpenHTTP("http://127.0.0.1:1/v1?health=0")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, c := range []struct {
		req  Request
		want string // the temperature field of the body, "" for none
	}{
		{Request{Greedy: true}, `"temperature":0`},
		{Request{Greedy: true, Temperature: 0.7}, `"temperature":0`},
		{Request{Temperature: 0.7}, `"temperature":0.7`},
		{Request{}, ""},
	} {
		b, err := p.body(c.req, 1, engineapi.ServedVersion{}, false)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if i := strings.Index(string(b), `"temperature":`); i >= 0 {
			got = string(b[i:])
			got = got[:strings.IndexAny(got, ",}")]
		}
		if got != c.want {
			t.Errorf("%+v: body has %q, want %q: %s", c.req, got, c.want, b)
		}
	}
}
