package main

import (
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"swerl/internal/engineapi"
	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/parquetio"
)

// Adapter following across processes: two `swerl serve` engines, `swerl
// learn --lora-rank 2 --engine A,B` in its own process pushing each
// version's adapter to both, then `swerl train` in a third process over
// both engines with follow=true: it learns from the engines which adapter
// they hold, names it, and every sample carries that exact version; both
// engines answered.
func TestTrainFollowsAdaptersOfASeparateLearner(t *testing.T) {
	if testing.Short() {
		t.Skip("child processes")
	}
	root := t.TempDir()
	base := tinyModelAt(t, filepath.Join(root, "base"))
	_, addrA := serveChild(t, base, "")
	_, addrB := serveChild(t, base, "")
	urlA, urlB := "http://"+addrA+"/v1", "http://"+addrB+"/v1"

	file := filepath.Join(root, "samples.parquet")
	if err := parquetio.WriteFile(file, pairGroups(3)); err != nil {
		t.Fatal(err)
	}
	runCLI(t, []string{"learn", "--model", base, "--samples", file, "--out", filepath.Join(root, "learn"), "--batch-groups", "1",
		"--max-staleness", "-1", "--max-seq", "128", "--metrics-addr", "", "--lr", "1e-3", "--lora-rank", "2", "--engine", urlA + "," + urlB}, 0, 5*time.Minute)
	for _, u := range []string{urlA, urlB} {
		if models := servedModels(t, u); !slices.Contains(models, engineapi.AdapterName(3)) {
			t.Fatalf("%s serves %v after the learner, want %s among them", u, models, engineapi.AdapterName(3))
		}
	}

	const n, g = 6, 2
	set := traintest.New(t, root, n, g, nil)
	out := filepath.Join(root, "train")
	_, log := runCLI(t, []string{"train", "--instances", set.InstancesPath, "--policy", urlA + "," + urlB + "?follow=true&route=round-robin&health=100ms",
		"--group-size", strconv.Itoa(g), "--max-tokens", "16", "--seed", "3", "--out", out, "--metrics-addr", "", "-v"}, 0, 5*time.Minute)
	samples, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != n*g {
		t.Fatalf("%d samples, want %d:\n%s", len(samples), n*g, log)
	}
	for _, s := range samples {
		if s.PolicyVersion != 3 {
			t.Fatalf("sample %s: policy version %d, want 3 (the adapter both engines hold)", s.ID, s.PolicyVersion)
		}
	}
	for _, addr := range []string{addrA, addrB} {
		m := regexp.MustCompile(`engine=http://` + regexp.QuoteMeta(addr) + ` requests=(\d+)`).FindStringSubmatch(log)
		if m == nil || m[1] == "0" {
			t.Fatalf("engine %s answered no request (%v):\n%s", addr, m, log)
		}
		t.Logf("engine %s: %s requests", addr, m[1])
	}
}
