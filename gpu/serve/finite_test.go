package serve

import (
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"swerl/gpu"
	"swerl/gpu/modeldir"
	"swerl/gpu/peft"
	"swerl/gpu/policy"
	"swerl/sinks/weightsync"
)

// mergePEFT is swerl serve's adapter loader: a copy of the base with the
// PEFT adapter in dir merged.
func mergePEFT(base *gpu.Model, dir string) (*gpu.Model, error) {
	a, err := peft.ReadFor(dir, base.Config)
	if err != nil {
		return nil, err
	}
	m, err := CopyModel(base)
	if err != nil {
		return nil, err
	}
	return m, peft.Merge(m, a)
}

// filledModel writes a copy of the model directory base whose weights are
// all v.
func filledModel(t *testing.T, base string, v float32) string {
	t.Helper()
	mp, err := modeldir.Load(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range mp.Model.Tensors() {
		for i := range x.Data {
			x.Data[i] = v
		}
	}
	dir := t.TempDir()
	if _, err := modeldir.WriteCheckpoint(dir, base, mp.Model, false); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Weights that make NaN logits are refused before they replace what is
// served: a PEFT adapter of all 3e38 (finite, but B·A overflows), an
// adapter whose merged weights are finite but overflow in the forward
// pass, and update_weights_from_disk with all-NaN or all-3e38 weights.
// Each is a 400 naming the tensor, on both engines' endpoints, and the
// base keeps answering exactly as before.
func TestNonFiniteWeightsAreRefused(t *testing.T) {
	opts := policy.Options{MaxSeq: 256, MaxTokens: 8, Log: quiet()}
	pol, dir := tinyPolicy(t, 9, opts)
	sv := New(pol, "tiny")
	sv.PolicyOptions = opts
	sv.LoadAdapter = func(base *gpu.Model, dir string) (*gpu.Model, error) {
		if _, err := os.Stat(filepath.Join(dir, "scale.txt")); err == nil {
			return scaleAdapter(base, dir)
		}
		return mergePEFT(base, dir)
	}
	srv := httptest.NewServer(sv.Handler())
	t.Cleanup(srv.Close)
	req := map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 6, "seed": 3, "logprobs": true}
	_, before, _ := post(t, srv.URL, req)

	lo, err := gpu.NewLoRA(pol.Loaded().Model.Config, gpu.LoRAConfig{Rank: 4, Targets: []string{"q_proj", "v_proj"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range lo.Tensors() {
		for i := range x.Data {
			x.Data[i] = 3e38
		}
	}
	big := filepath.Join(t.TempDir(), "big")
	if err := peft.Write(big, peft.FromLoRA(lo, dir)); err != nil {
		t.Fatal(err)
	}
	over := adapterDir(t, "1e30") // mlp weights of 2e28: finite, but the forward pass overflows

	for _, tc := range []struct{ path, lora, msg string }{
		{"/v1/load_lora_adapter", big, "model.layers.0.self_attn.q_proj.weight"},
		{"/load_lora_adapter", big, "model.layers.0.self_attn.q_proj.weight"},
		{"/v1/load_lora_adapter", over, "probe"},
	} {
		code, body := postJSON(t, srv.URL+tc.path, map[string]string{"lora_name": "bad", "lora_path": tc.lora})
		if msg := weightsync.Message([]byte(body)); code != 400 || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s %s: %d %s; want 400 naming %q", tc.path, filepath.Base(tc.lora), code, body, tc.msg)
		}
	}
	if ids := modelIDs(t, srv.URL); !slices.Equal(ids, []string{"tiny"}) {
		t.Errorf("models %q after refused adapters", ids)
	}
	for _, tc := range []struct {
		v   float32
		msg string
	}{
		{float32(math.NaN()), "model.embed_tokens.weight"},
		{3e38, "probe"},
	} {
		code, body := postJSON(t, srv.URL+"/update_weights_from_disk", map[string]any{"model_path": filledModel(t, dir, tc.v), "weight_version": "swerl-v000009"})
		if msg := weightsync.Message([]byte(body)); code != 400 || !strings.Contains(body, `"success":false`) || !strings.Contains(msg, tc.msg) {
			t.Errorf("update to weights of %v: %d %s; want 400 naming %q", tc.v, code, body, tc.msg)
		}
	}
	resp, after, _ := post(t, srv.URL, req)
	if resp.StatusCode != 200 || len(after.Choices) == 0 || after.SystemFingerprint != before.SystemFingerprint || !slices.Equal(logprobsOf(after), logprobsOf(before)) ||
		after.Choices[0].Message.Content != before.Choices[0].Message.Content {
		t.Fatalf("the base changed: %d %+v, before %+v", resp.StatusCode, after, before)
	}
	// A good adapter still loads.
	if code, body := postJSON(t, srv.URL+"/v1/load_lora_adapter", map[string]string{"lora_name": "good", "lora_path": adapterDir(t, "1.5")}); code != 200 {
		t.Fatalf("good adapter: %d %s", code, body)
	}
}
