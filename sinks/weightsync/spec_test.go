package weightsync

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"swerl/internal/engineapi"
)

func TestParseSpec(t *testing.T) {
	t.Setenv("SWERL_API_KEY", "k1")
	tests := []struct {
		name, spec string
		want       Spec
	}{
		{"defaults", "http://h:8000/v1", Spec{URLs: []string{"http://h:8000/v1"}, Bases: []string{"http://h:8000"},
			Model: "default", Concurrency: 8, Retries: 5, Timeout: 120 * time.Second, Backoff: 500 * time.Millisecond,
			Kind: engineapi.VLLM, Route: RouteLeastLoaded, Health: 5 * time.Second, Sync: true}},
		{"every key", "https://h/v1/chat/completions,http://g:1?model=m&concurrency=2&retries=0&timeout=3s&backoff=1ms&token_ids=true&logprobs=processed&engine=sglang&route=round-robin&health=0&follow=false&sync=false&keep_adapters=3&engine_path=/a=/b",
			Spec{URLs: []string{"https://h/v1/chat/completions", "http://g:1"}, Bases: []string{"https://h", "http://g:1"},
				Model: "m", Concurrency: 2, Retries: 0, Timeout: 3 * time.Second, Backoff: time.Millisecond, TokenIDs: true, Processed: true,
				Kind: engineapi.SGLang, Route: RouteRoundRobin, Health: 0, Sync: false, Keep: 3, PathMap: "/a=/b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSpec(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
	bad := []struct{ spec, want string }{
		{"http://h/v1?model=a&model=b", "model given 2 times"},
		{"http://h/v1?engine=sglang&engine=vllm", "engine given 2 times"},
		{"http://h/v1?keep_adapters=0", "keep_adapters="},
		{"http://h/v1?sync=maybe", "sync="},
		{"http://h/v1?engine=tgi", "engine="},
		{"http://h/v1?color=red", "unknown parameter"},
		{"http://h/v1?follow=true&health=0", "follow=true"},
		{"http://a/v1?model=m,http://b/v1", "write them once"},
		{"http://a/v1,http://a/v1/", "listed twice"},
		{"http://a/v1,ftp://x/v1", "not an http(s) URL"},
		{"model:/x", "not an http(s) URL"},
		{"http:///v1", "not an http(s) URL"},
	}
	for _, b := range bad {
		if _, err := ParseSpec(b.spec); err == nil || !strings.Contains(err.Error(), b.want) || !strings.Contains(err.Error(), b.spec) {
			t.Errorf("ParseSpec(%q) = %v, want an error naming the spec and %q", b.spec, err, b.want)
		}
	}
}

func TestSpecSyncConfig(t *testing.T) {
	t.Setenv("SWERL_API_KEY", "k1")
	sp, err := ParseSpec("http://h:1/v1,http://g:2?model=m&engine=sglang&keep_adapters=3&engine_path=/a=/b")
	if err != nil {
		t.Fatal(err)
	}
	cfg, ok := sp.SyncConfig()
	want := Config{Engines: []Engine{{"http://h:1", engineapi.SGLang}, {"http://g:2", engineapi.SGLang}}, Keep: 3, PathMap: "/a=/b", APIKey: "k1"}
	if !ok || !reflect.DeepEqual(cfg, want) {
		t.Fatalf("got  %+v %v\nwant %+v", cfg, ok, want)
	}
	sp, _ = ParseSpec("http://h:1/v1?sync=false")
	if _, ok := sp.SyncConfig(); ok {
		t.Fatal("sync=false: want no sync")
	}
}

func TestWithDefault(t *testing.T) {
	for in, want := range map[string]string{
		"http://a/v1,http://b/v1?model=m": "http://a/v1,http://b/v1?follow=true&model=m",
		"http://a/v1?follow=false":        "http://a/v1?follow=false",
		"file:/x.jsonl":                   "file:/x.jsonl",
		"model:/m":                        "model:/m",
	} {
		if got := WithDefault(in, "follow", "true"); got != want {
			t.Errorf("WithDefault(%q) = %q, want %q", in, got, want)
		}
	}
}
