package train

import (
	"strings"
	"testing"
)

// A Kafka key names the request index Feed gave the record, for instance
// ids that hold '#' themselves (mined PRs are "owner/repo#N") too; a bare
// id, a foreign key or a malformed suffix is request 0 (or the file index
// the record carries).
func TestRequestIndex(t *testing.T) {
	for _, c := range []struct {
		key, id string
		file    int
		want    int
	}{
		{RequestKey("o/r#12", 0), "o/r#12", 0, 0},
		{RequestKey("o/r#12", 3), "o/r#12", 0, 3},
		{"o/r#12#3", "o/r#1", 0, 0},
		{"o/r#12#03", "o/r#12", 0, 0},
		{"o/r#12#-1", "o/r#12", 0, 0},
		{"o/r#12#", "o/r#12", 0, 0},
		{"", "a", 5, 5},
		{"a", "a", 5, 5},
	} {
		r := Record{Key: c.key, Request: c.file}
		if got := requestIndex(&r, c.id); got != c.want {
			t.Errorf("key %q id %q: request %d, want %d", c.key, c.id, got, c.want)
		}
	}
}

func FuzzRequestIndex(f *testing.F) {
	f.Add("o/r#12#3", "o/r#12", 7)
	f.Add("x", "x", 0)
	f.Add("x#99999999999999999999", "x", 1)
	f.Fuzz(func(t *testing.T, key, id string, n int) {
		r := Record{Key: key}
		if got := requestIndex(&r, id); got < 0 {
			t.Fatalf("key %q id %q: negative request %d", key, id, got)
		}
		if n < 0 || strings.Contains(id, "\x00") {
			return
		}
		r = Record{Key: RequestKey(id, n)}
		if got := requestIndex(&r, id); got != n {
			t.Fatalf("RequestKey(%q, %d) reads back as %d", id, n, got)
		}
	})
}
