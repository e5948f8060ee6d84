package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"swerl/gpu/modeldir"
)

func TestModelInitInfo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	var out, errb bytes.Buffer
	if code := runMain(context.Background(), []string{"model", "init", "--out", dir, "--seed", "3"}, &out, &errb); code != 0 {
		t.Fatalf("init exit %d: %s", code, errb.String())
	}
	p, err := modeldir.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := runMain(context.Background(), []string{"model", "info", dir}, &out, &errb); code != 0 {
		t.Fatalf("info exit %d: %s", code, errb.String())
	}
	var info modelInfo
	if err := json.Unmarshal(out.Bytes(), &info); err != nil {
		t.Fatalf("info output %q: %v", out.String(), err)
	}
	if info.Params != p.Model.NumParams() || info.ChatFormat != "chatml" || len(info.StopText) == 0 || info.StopText[0] != "<|im_end|>" || info.Version != -1 {
		t.Errorf("info = %+v", info)
	}
	if code := runMain(context.Background(), []string{"model", "init", "--out", dir, "--config", "nope"}, &out, &errb); code != 2 {
		t.Errorf("unknown config: exit %d, want 2", code)
	}
	if code := runMain(context.Background(), []string{"model", "info", t.TempDir()}, &out, &errb); code != 1 {
		t.Errorf("info of an empty dir: exit %d, want 1", code)
	}
}
