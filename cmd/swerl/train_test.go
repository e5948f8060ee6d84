package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/parquetio"
	"swerl/transforms/reward"
)

// TestTrainContract is the issue's contract: `swerl train --instances
// I.jsonl --policy file:C.jsonl --group-size G --out DIR` with no --brokers
// runs through the embedded broker and Prism and exits; DIR/samples holds
// exactly one row per (instance, completion) with the reward
// transforms/reward.SearchReplace gives it and its group's GRPO advantage,
// computed here from the inputs. A bad line becomes a dead-letter naming
// its line.
func TestTrainContract(t *testing.T) {
	dir := t.TempDir()
	const n, g = 6, 4
	set := traintest.New(t, dir, n, g, map[int]string{2: "this is not json"})
	out := filepath.Join(dir, "out")
	se := trainFilePolicy(t, set.InstancesPath, set.CompletionsPath, g, out)
	if !strings.Contains(se, "embedded Kafka broker") || !strings.Contains(se, "samples written") {
		t.Fatalf("stderr lacks the broker line or the summary:\n%s", se)
	}
	rows, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		id  string
		idx int
	}
	got := map[key]schemas.Sample{}
	for _, s := range rows {
		k := key{s.InstanceID, s.Index}
		if _, dup := got[k]; dup {
			t.Fatalf("two rows for %v", k)
		}
		got[k] = s
	}
	if len(rows) != n*g {
		t.Fatalf("%d rows, want %d", len(rows), n*g)
	}
	for _, in := range set.Instances {
		cs := set.Completions[in.ID]
		r := make([]float64, g)
		var mean float64
		for j, c := range cs {
			r[j] = reward.SearchReplace(context.Background(), in.CodeContext, in.OracleNewContent, c).Reward
			mean += r[j] / g
		}
		var v float64
		for _, x := range r {
			v += (x - mean) * (x - mean) / g
		}
		std := math.Sqrt(v)
		for j := range cs {
			s, ok := got[key{in.ID, j}]
			if !ok {
				t.Fatalf("no row for %s/%d", in.ID, j)
			}
			adv := 0.0
			if std > 0 {
				adv = (r[j] - mean) / (std + 1e-6)
			}
			if s.Completion != cs[j] || math.Abs(s.Reward-r[j]) > 1e-9 || math.Abs(s.Advantage-adv) > 1e-9 {
				t.Errorf("%s/%d: reward %v advantage %v, want %v %v", in.ID, j, s.Reward, s.Advantage, r[j], adv)
			}
		}
	}
	dls, err := parquetio.ReadDir[schemas.DeadLetter](filepath.Join(out, "deadletter"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 1 || dls[0].Source != set.InstancesPath+":3" || string(dls[0].Value) != "this is not json" {
		t.Fatalf("dead-letters %+v", dls)
	}
}

// trainFilePolicy runs `swerl train` on instances with the recorded
// completions as a file policy, groups of g and --out out, and no metrics
// server; it fails the test unless the command exits 0, and returns its
// stderr.
func trainFilePolicy(t *testing.T, instances, completions string, g int, out string) string {
	t.Helper()
	var so, se bytes.Buffer
	args := []string{"train", "--instances", instances, "--policy", "file:" + completions,
		"--group-size", fmt.Sprint(g), "--out", out, "--metrics-addr", ""}
	if code := runMain(context.Background(), args, &so, &se); code != 0 {
		t.Fatalf("swerl train --instances %s --out %s: exit %d\n%s", instances, out, code, se.String())
	}
	return se.String()
}

func TestTrainUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--instances", "x.jsonl"}, "--policy"},
		{[]string{"train", "--policy", "file:x", "--advantage", "ppo"}, "ppo"},
		{[]string{"train", "--policy", "file:x", "--incomplete", "keep"}, "keep"},
		{[]string{"train", "--policy", "file:x", "--instances", "x", "--follow"}, "--follow"},
		{[]string{"train", "--policy", "file:x", "--group", "workers"}, "--follow"},
	} {
		var so, se bytes.Buffer
		if code := runMain(context.Background(), tc.args, &so, &se); code != 2 || !strings.Contains(se.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q", tc.args, code, se.String())
		}
	}
	var so, se bytes.Buffer
	if code := runMain(context.Background(), []string{"train", "-h"}, &so, &se); code != 0 {
		t.Fatalf("-h: exit %d", code)
	}
	for _, f := range []string{"-instances", "-policy", "-group-size", "-advantage", "-drop-zero-variance", "-group-timeout",
		"-incomplete", "-out", "-temperature", "-max-tokens", "-concurrency", "-follow", "-group", "-group-session-timeout", "-metrics-addr", "-brokers", "-runner"} {
		if !strings.Contains(se.String(), f) {
			t.Errorf("--help lacks %s", f)
		}
	}
}
