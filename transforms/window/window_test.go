package window

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"swerl/schemas"
	"swerl/transforms/prompt"
	"swerl/transforms/reward"
)

func lines(n int, f func(i int) string) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(f(i))
		b.WriteByte('\n')
	}
	return b.String()
}

func TestHunksAreTheFullDiffsHunks(t *testing.T) {
	old := lines(200, func(i int) string { return fmt.Sprintf("line %d", i) })
	new := strings.Replace(old, "line 10\n", "line ten\n", 1)
	new = strings.Replace(new, "line 150\n", "line 150\nadded\n", 1)
	in := &schemas.Instance{ID: "o/r#1", ProblemStatement: strings.Repeat("é", 400),
		CodeContext:      map[string]string{"a.go": old, "rel.go": "x\n"},
		OracleNewContent: map[string]string{"a.go": new}}
	hs, dropped := Hunks(in, Options{})
	if len(hs) != 2 || dropped != 0 {
		t.Fatalf("%d hunks, %d dropped; want 2, 0", len(hs), dropped)
	}
	if hs[0].ID != "o/r#1/a.go:8" || hs[1].ID != "o/r#1/a.go:149" {
		t.Fatalf("ids %q %q", hs[0].ID, hs[1].ID)
	}
	// The window diff equals the full diff's hunk bodies (headers differ by
	// line numbers only).
	full, _ := reward.NormalizedPatch(context.Background(), in.CodeContext, in.OracleNewContent)
	var joined []string
	for _, h := range hs {
		if len(h.ProblemStatement) > 400 || !strings.HasPrefix(in.ProblemStatement, h.ProblemStatement) {
			t.Fatalf("issue not cut at a rune boundary within 400 bytes: %d bytes", len(h.ProblemStatement))
		}
		if _, ok := h.CodeContext["rel.go"]; ok {
			t.Fatal("unmodified files must not be in a hunk's context")
		}
		d, _ := reward.NormalizedPatch(context.Background(), h.CodeContext, h.OracleNewContent)
		body := d["a.go"]
		joined = append(joined, body[strings.Index(body, "\n")+1:])
		// The oracle answer of a hunk scores 1 on the hunk instance.
		ans, err := prompt.OracleAnswer(&h, h.CodeContext)
		if err != nil {
			t.Fatal(err)
		}
		if r := reward.SearchReplace(context.Background(), h.CodeContext, h.OracleNewContent, ans); r.Reward != 1 {
			t.Fatalf("%s: oracle answer scores %v (%s)", h.ID, r.Reward, r.Error)
		}
	}
	var fullBodies []string
	for _, part := range strings.Split(full["a.go"], "\n@@")[0:] {
		fullBodies = append(fullBodies, part[strings.Index(part, "\n")+1:])
	}
	if strings.Join(fullBodies, "|") != strings.Join(joined, "|") {
		t.Fatalf("hunk bodies differ from the full diff:\n%q\n%q", fullBodies, joined)
	}
}

func TestHunksDropsLargeWindows(t *testing.T) {
	old := lines(100, func(i int) string { return strings.Repeat("x", 40) })
	new := lines(100, func(i int) string { return strings.Repeat("y", 40) })
	in := &schemas.Instance{ID: "o/r#2", CodeContext: map[string]string{"a": old}, OracleNewContent: map[string]string{"a": new}}
	hs, dropped := Hunks(in, Options{MaxBytes: 1000})
	if len(hs) != 0 || dropped != 1 {
		t.Fatalf("%d hunks, %d dropped; want 0, 1", len(hs), dropped)
	}
}
