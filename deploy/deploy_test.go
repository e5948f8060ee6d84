package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"gopkg.in/yaml.v3"
)

// ---------------------------------------------------------------------------
// Loading

// deployDir is the folder of this package: go test runs in it.
func deployDir(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(wd, "compose", "compose.yaml")); err != nil {
		t.Fatalf("deploy folder not found from %s: %v", wd, err)
	}
	return wd
}

// filesWithExt lists the files under the deploy folder with one of exts.
func filesWithExt(t *testing.T, exts ...string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(deployDir(t), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "node_modules" {
			return filepath.SkipDir
		}
		if !d.IsDir() && slices.Contains(exts, filepath.Ext(path)) {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no %v files under %s", exts, deployDir(t))
	}
	return out
}

// yamlDocs decodes every document of a YAML stream. Empty documents are
// dropped; a document that is not a mapping is an error.
func yamlDocs(data []byte) ([]map[string]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []map[string]any
	for i := 1; ; i++ {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if v == nil {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("document %d: top level is %T, not a mapping", i, v)
		}
		docs = append(docs, m)
	}
}

func loadYAML(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := yamlDocs(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return docs
}

func loadOneYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	docs := loadYAML(t, path)
	if len(docs) != 1 {
		t.Fatalf("%s: %d documents, want 1", path, len(docs))
	}
	return docs[0]
}

// Accessors over decoded YAML/JSON: a missing or mistyped step yields the
// zero value, and the checks below treat that as absent.

func mapAt(v any, keys ...string) map[string]any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	m, _ := v.(map[string]any)
	return m
}

func listAt(v any, keys ...string) []any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	l, _ := v.([]any)
	return l
}

func strAt(v any, keys ...string) string {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	switch s := v.(type) {
	case string:
		return s
	case nil:
		return ""
	default:
		return fmt.Sprint(s)
	}
}

func strList(v []any) []string {
	out := make([]string, 0, len(v))
	for _, e := range v {
		out = append(out, fmt.Sprint(e))
	}
	return out
}

// ---------------------------------------------------------------------------
// Every file parses

func TestYAMLFilesParse(t *testing.T) {
	for _, path := range filesWithExt(t, ".yaml", ".yml") {
		docs := loadYAML(t, path)
		if len(docs) == 0 {
			t.Errorf("%s: no YAML document", path)
		}
	}
}

func TestYAMLDecoderRejectsBadInput(t *testing.T) {
	// The parse check above is only worth something if these fail.
	for _, tc := range []struct{ name, in string }{
		{"duplicate key", "a: 1\na: 2\n"},
		{"bad indentation", "a:\n  b: 1\n c: 2\n"},
		{"scalar document", "just a string\n"},
		{"tab indentation", "a:\n\tb: 1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := yamlDocs([]byte(tc.in)); err == nil {
				t.Errorf("yamlDocs(%q) = nil error, want an error", tc.in)
			}
		})
	}
}

func TestJSONFilesParse(t *testing.T) {
	for _, path := range filesWithExt(t, ".json") {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if dec.More() {
			t.Errorf("%s: data after the first JSON value", path)
		}
	}
}
