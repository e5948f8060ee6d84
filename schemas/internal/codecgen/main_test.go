package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedFilesAreCurrent fails when the committed codecs of package
// schemas differ from what codecgen writes from its struct definitions
// today: a field was added, changed or removed without `go generate
// ./schemas`.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	files, err := generate("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("codecgen generated nothing")
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join("../..", name))
		if err != nil {
			t.Fatalf("%v: run go generate ./schemas", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("schemas/%s is stale: run go generate ./schemas", name)
		}
	}
}

// TestGenerateFollowsTheStructs generates from a copy of the package with
// a field added to Instance and one to Sample: every codec carries them,
// and a field of a type without a codec rule is an error naming it.
func TestGenerateFollowsTheStructs(t *testing.T) {
	src, err := os.ReadFile("../../schemas.go")
	if err != nil {
		t.Fatal(err)
	}
	edit := func(s, anchor, add string) string {
		t.Helper()
		if !strings.Contains(s, anchor) {
			t.Fatalf("schemas.go has no %q", anchor)
		}
		return strings.Replace(s, anchor, anchor+"\n"+add, 1)
	}
	s := edit(string(src), "type Instance struct {", "\tReviewer string `json:\"reviewer\" parquet:\"reviewer\"`")
	s = edit(s, "type Sample struct {\n\tRollout", "\tTurns []int32 `json:\"turns,omitempty\" parquet:\"turns,list\"`")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "schemas.go"), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ file, text string }{
		{"jsoncodec_gen.go", "instanceFieldReviewer"},
		{"jsoncodec_gen.go", "v.Reviewer, ok = p.Str()"},
		{"jsoncodec_gen.go", "`,\"turns\":`"},
		{"bincode_gen.go", "bincode.AppendString(b, v.Reviewer)"},
		{"bincode_gen.go", "v.Reviewer = d.String()"},
		{"bincode_gen.go", "bincode.AppendInt32s(b, v.Turns)"},
		{"bincode_gen.go", "v.Turns = d.Int32s()"},
		{"fieldlens_gen.go", "len(v.Reviewer)"},
		{"fieldlens_gen.go", "len(v.Turns)"},
	} {
		if !strings.Contains(string(files[want.file]), want.text) {
			t.Errorf("%s lacks %s", want.file, want.text)
		}
	}

	s = edit(string(src), "type Instance struct {", "\tReviewers []bool `json:\"reviewers\"`")
	os.WriteFile(filepath.Join(dir, "schemas.go"), []byte(s), 0o644)
	if _, err := generate(dir); err == nil || !strings.Contains(err.Error(), "Reviewers") {
		t.Errorf("a field without a codec rule: %v", err)
	}
}
