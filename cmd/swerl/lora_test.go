package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"swerl/gpu/modeldir"
	"swerl/gpu/peft"
	"swerl/internal/syncbuf"
	"swerl/schemas"
	"swerl/sinks/checkpoint"
	"swerl/sinks/parquetio"
)

// swerl learn --lora-rank publishes PEFT adapters; the output root serves
// as a model (base + newest adapter); swerl model merge writes the merged
// weights as a plain model directory that swerl serve loads.
func TestLearnLoRAThenMerge(t *testing.T) {
	dir := t.TempDir()
	model := tinyModel(t, dir)
	out := filepath.Join(dir, "out")
	var so bytes.Buffer
	se := new(syncbuf.Buffer)
	file := filepath.Join(dir, "samples.parquet")
	if err := parquetio.WriteFile(file, pairGroups(2)); err != nil {
		t.Fatal(err)
	}
	args := []string{"learn", "--model", model, "--samples", file, "--out", out, "--batch-groups", "1", "--max-staleness", "-1",
		"--max-seq", "128", "--metrics-addr", "", "--lr", "1e-2", "--lora-rank", "2", "--lora-alpha", "8", "--lora-targets", "q,v,down"}
	if code := runMain(context.Background(), args, &so, se); code != 0 {
		t.Fatalf("learn exit %d: %s", code, se.String())
	}
	st, _ := checkpoint.Open(checkpoint.Config{Dir: out, ReadOnly: true})
	v, err := st.LatestGood()
	if err != nil || v.Version != 2 {
		t.Fatalf("latest %+v, %v", v, err)
	}
	a, err := peft.Read(st.Path(2))
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(model)
	if a.Config.R != 2 || a.Config.LoraAlpha != 8 || !slices.Equal(a.Config.TargetModules, []string{"q_proj", "v_proj", "down_proj"}) || a.Config.BaseModelNameOrPath != abs {
		t.Errorf("adapter config %+v", a.Config)
	}
	so.Reset()
	if code := runMain(context.Background(), []string{"model", "info", out}, &so, se); code != 0 || !strings.Contains(so.String(), `"version": 2`) {
		t.Errorf("model info of the LoRA output root: %s %s", so.String(), se.String())
	}
	merged := filepath.Join(dir, "merged")
	if code := runMain(context.Background(), []string{"model", "merge", "--adapter", out, "--out", merged}, &so, se); code != 0 {
		t.Fatalf("model merge exit %d: %s", code, se.String())
	}
	want, err := modeldir.Load(st.Path(2))
	if err != nil {
		t.Fatal(err)
	}
	got, err := modeldir.Load(merged)
	if err != nil {
		t.Fatal(err)
	}
	wt, gt := want.Model.Tensors(), got.Model.Tensors()
	for i := range wt {
		if !slices.Equal(wt[i].Data, gt[i].Data) {
			t.Fatalf("%s of the merged directory differs from base + adapter", wt[i].Name)
		}
	}
	base, _ := modeldir.Load(model)
	if slices.Equal(base.Model.Params.Layers[0].Q, got.Model.Params.Layers[0].Q) {
		t.Error("the merged q_proj equals the base's: nothing was merged")
	}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json", "config.json", "model.safetensors"} {
		if _, err := os.Stat(filepath.Join(merged, f)); err != nil {
			t.Errorf("merged directory: %v", err)
		}
	}
	// Merging again into a model directory is refused; so is a base that
	// is an adapter.
	if code := runMain(context.Background(), []string{"model", "merge", "--adapter", st.Path(2), "--out", merged}, &so, se); code != 2 {
		t.Errorf("merge into an existing model: exit %d, want 2", code)
	}
	if code := runMain(context.Background(), []string{"model", "merge", "--base", st.Path(1), "--adapter", st.Path(2), "--out", filepath.Join(dir, "x")}, &so, se); code != 2 {
		t.Errorf("merge onto an adapter: exit %d, want 2", code)
	}
	// swerl serve loads the merged directory.
	addr, _, stop := startServe(t, merged, "--max-seq", "128", "--metrics-addr", "")
	resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":3,"seed":7}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("chat completion on the merged model: %s", resp.Status)
	}
	stop()
	if code := runMain(context.Background(), []string{"learn", "--model", model, "--samples", file, "--out", filepath.Join(dir, "o2"), "--metrics-addr", "", "--lora-rank", "2", "--lora-targets", "lm_head"}, &so, se); code != 2 {
		t.Errorf("--lora-targets lm_head: exit %d, want 2", code)
	}
}

// swerl run --lora-rank: the warm start is full fine-tuning, the RL steps
// publish adapters on the warm start's last version, and the rollouts (the
// Beam train pipeline with the in-process model: policy, which merges the
// adapters) carry the versions the learner published.
func TestRunLoRA(t *testing.T) {
	repo := runRepo(t)
	out := filepath.Join(t.TempDir(), "out")
	args := []string{"run", "--repo", repo, "--out", out, "--sft-steps", "2", "--batch", "2", "--group-size", "2", "--steps", "2",
		"--max-tokens", "200", "--eval", "0", "--metrics-addr", "", "--seed", "3", "--keep-checkpoints", "2", "--lora-rank", "2", "--lr", "1e-2"}
	st := runVersions(t, args, out, 5) // v0 + 2 SFT + 2 RL
	for _, v := range []int64{3, 4} {
		a, err := peft.Read(st.Path(v))
		if err != nil {
			t.Fatalf("RL version v%d: %v", v, err)
		}
		if a.Config.BaseModelNameOrPath != st.Path(2) || a.Config.R != 2 {
			t.Errorf("v%d adapter config %+v, want rank 2 on %s", v, a.Config, st.Path(2))
		}
	}
	if _, err := os.Stat(filepath.Join(st.Path(2), "config.json")); err != nil {
		t.Errorf("the LoRA base v2 was pruned: %v", err)
	}
	checkSampleVersions(t, out, []int64{2, 2, 2, 2, 3, 3, 3, 3})
}

// swerl run --lora-rank --sft-lora: the warm start trains adapters too, so
// every version, v0's zero adapter and the warm start's included, is a
// PEFT adapter on the --model directory itself (what an engine that loads
// only adapters holds), the warm start's adapter moves the policy, and RL
// continues that adapter.
func TestRunSFTLoRA(t *testing.T) {
	root := t.TempDir()
	base := tinyModelAt(t, filepath.Join(root, "base"))
	out := filepath.Join(root, "out")
	args := []string{"run", "--repo", runRepo(t), "--out", out, "--model", base, "--sft-steps", "2", "--sft-lora", "--batch", "2", "--group-size", "2", "--steps", "2",
		"--max-tokens", "200", "--eval", "0", "--metrics-addr", "", "--seed", "3", "--lora-rank", "2", "--lr", "1e-2"}
	st := runVersions(t, args, out, 5) // v0 + 2 SFT + 2 RL
	abs, _ := filepath.Abs(base)
	var prev *peft.Adapter
	for v := int64(0); v < 5; v++ {
		a, err := peft.Read(st.Path(v))
		if err != nil {
			t.Fatalf("v%d is not an adapter: %v", v, err)
		}
		if a.Config.BaseModelNameOrPath != abs || a.Config.R != 2 {
			t.Errorf("v%d adapter config %+v, want rank 2 on %s", v, a.Config, abs)
		}
		if prev != nil && v <= 2 && sameTensors(prev, a) {
			t.Errorf("warm-start version v%d has the adapter of v%d: the warm start trained nothing", v, v-1)
		}
		prev = a
	}
	checkSampleVersions(t, out, []int64{2, 2, 2, 2, 3, 3, 3, 3})

	var usage bytes.Buffer
	if code := runMain(context.Background(), []string{"run", "--sft-lora", "--out", filepath.Join(root, "x")}, &usage, &usage); code != 2 || !strings.Contains(usage.String(), "--lora-rank") {
		t.Errorf("--sft-lora without --lora-rank: exit %d:\n%s", code, usage.String())
	}
}

// sameTensors reports whether two adapters hold the same tensor values.
func sameTensors(a, b *peft.Adapter) bool {
	if len(a.Tensors) != len(b.Tensors) {
		return false
	}
	for i := range a.Tensors {
		if !slices.Equal(a.Tensors[i].Data, b.Tensors[i].Data) {
			return false
		}
	}
	return true
}

// checkSampleVersions checks the policy versions of the samples under
// out/samples, sorted, against want.
func checkSampleVersions(t *testing.T, out string, want []int64) {
	t.Helper()
	samples, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
	if err != nil {
		t.Fatal(err)
	}
	var versions []int64
	for _, s := range samples {
		versions = append(versions, s.PolicyVersion)
	}
	slices.Sort(versions)
	if !slices.Equal(versions, want) {
		t.Errorf("sample policy versions %v, want %v", versions, want)
	}
}

// runVersions runs the swerl command args in this process and returns the
// checkpoint store under out, which must hold want versions.
func runVersions(t *testing.T, args []string, out string, want int) *checkpoint.Store {
	t.Helper()
	var stderr bytes.Buffer
	if code := runMain(context.Background(), args, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	st, err := checkpoint.Open(checkpoint.Config{Dir: out, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := st.Versions()
	if err != nil || len(rows) != want {
		t.Fatalf("%d versions (%v), want %d", len(rows), err, want)
	}
	return st
}
