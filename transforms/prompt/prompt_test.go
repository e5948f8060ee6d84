package prompt

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"swerl/internal/difflib"
	"swerl/schemas"
)

func inst() *schemas.Instance {
	return &schemas.Instance{
		ID:               "o/r#1",
		ProblemStatement: "add() returns the wrong sum",
		CodeContext: map[string]string{
			"z_mod.py": "def add(a, b):\n    return a - b\n",
			"a_rel.py": "import z_mod\n",
		},
		OracleNewContent: map[string]string{"z_mod.py": "def add(a, b):\n    return a + b\n"},
	}
}

func TestBuildShowsEveryFileModifiedFirst(t *testing.T) {
	p, err := Build(inst(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.System != System || !strings.Contains(p.System, "<think>") {
		t.Fatalf("system prompt: %q", p.System)
	}
	want := "--- BEGIN ISSUE ---\nadd() returns the wrong sum\n--- END ISSUE ---"
	if !strings.Contains(p.User, want) {
		t.Fatalf("user prompt lacks the issue block:\n%s", p.User)
	}
	body := "```\n### z_mod.py\ndef add(a, b):\n    return a - b\n\n\n### a_rel.py\nimport z_mod\n\n```"
	if !strings.Contains(p.User, "--- BEGIN FILE ---\n"+body+"\n--- END FILE ---") {
		t.Fatalf("file block wrong:\n%s", p.User)
	}
	if len(p.Files) != 2 || p.Files["a_rel.py"] != "import z_mod\n" || len(p.Skipped) != 0 {
		t.Fatalf("files %v skipped %v", p.Files, p.Skipped)
	}
	if !strings.HasSuffix(p.User, "use a separate code block for each one.") {
		t.Fatalf("user prompt tail: %q", p.User[len(p.User)-80:])
	}
	q, _ := Build(inst(), Options{NoSystem: true})
	if q.System != "" || q.User != p.User {
		t.Fatal("NoSystem must only drop the system prompt")
	}
}

func TestBuildCaps(t *testing.T) {
	in := inst()
	p, err := Build(in, Options{MaxFiles: 1})
	if err != nil || len(p.Files) != 1 || p.Files["z_mod.py"] == "" || len(p.Skipped) != 1 || strings.Contains(p.User, "a_rel.py") {
		t.Fatalf("MaxFiles: %v %v %v", p.Files, p.Skipped, err)
	}
	p, err = Build(in, Options{MaxFileBytes: 20})
	if err != nil || len(p.Files) != 1 || p.Files["a_rel.py"] == "" || !strings.Contains(p.Skipped[0], "z_mod.py") {
		t.Fatalf("MaxFileBytes: %v %v %v", p.Files, p.Skipped, err)
	}
	full, _ := Build(in, Options{})
	limit := len(full.System) + len(full.User) - 5
	p, err = Build(in, Options{MaxPromptBytes: limit})
	if err != nil || len(p.Files) != 1 || len(p.System)+len(p.User) > limit {
		t.Fatalf("MaxPromptBytes: %v %v %v", p.Files, p.Skipped, err)
	}
	// An issue too long for the cap is cut at a rune boundary.
	in.ProblemStatement = strings.Repeat("é", 5000)
	p, err = Build(in, Options{MaxPromptBytes: len(System) + 3000})
	if err != nil {
		t.Fatal(err)
	}
	if p.IssueCut == 0 || !utf8.ValidString(p.User) || len(p.System)+len(p.User) > len(System)+3000 {
		t.Fatalf("issue cut %d, valid %v, size %d", p.IssueCut, utf8.ValidString(p.User), len(p.System)+len(p.User))
	}
	if _, err := Build(in, Options{MaxPromptBytes: 10}); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("tiny cap: %v", err)
	}
	if _, err := Build(&schemas.Instance{ID: "x"}, Options{}); err == nil || !strings.Contains(err.Error(), "x") {
		t.Fatalf("invalid instance: %v", err)
	}
}

// refBlock is written from SWE-RL.md §4.1, independently of blockRE.
var refBlock = regexp.MustCompile("```.*?\\n### (.*)\\n<<<<<<< SEARCH\\n([\\s\\S]*?)\\n=======\\n([\\s\\S]*?)\\n>>>>>>> REPLACE\\n```")

// applyRef applies an answer with the reference semantics (§4.2): tags once
// each, non-empty thought, blocks applied in order, "\n"-anchored replace-all.
func applyRef(t *testing.T, ctx map[string]string, out string) map[string]string {
	t.Helper()
	for _, tag := range []string{"<think>", "</think>", "<solution>", "</solution>"} {
		if strings.Count(out, tag) != 1 {
			t.Fatalf("tag %s count %d", tag, strings.Count(out, tag))
		}
	}
	thought := strings.TrimSpace(strings.SplitN(strings.SplitN(out, "<think>", 2)[1], "</think>", 2)[0])
	if thought == "" {
		t.Fatal("empty thought")
	}
	ans := strings.SplitN(strings.SplitN(out, "<solution>", 2)[1], "</solution>", 2)[0]
	res := map[string]string{}
	ms := refBlock.FindAllStringSubmatch(ans, -1)
	if len(ms) == 0 {
		t.Fatal("no blocks")
	}
	for _, m := range ms {
		path, s, r := m[1], m[2], m[3]
		cur, ok := res[path]
		if !ok {
			cur = "\n" + ctx[path]
		}
		if s == r || !strings.Contains(cur, "\n"+s) {
			t.Fatalf("%s: block fails (identical %v)", path, s == r)
		}
		res[path] = strings.ReplaceAll(cur, "\n"+s, "\n"+r)
	}
	for p, c := range res {
		res[p] = c[1:]
	}
	return res
}

func randFile(r *rand.Rand) string {
	words := []string{"x = 1", "return x", "", "    pass", "def f():", "}", "x = 1 # c"}
	var b strings.Builder
	for range r.IntN(12) {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteString([]string{"\n", "\n", "\n", "\r\n"}[r.IntN(4)])
	}
	if r.IntN(4) == 0 {
		b.WriteString("tail")
	}
	return b.String()
}

func mutate(r *rand.Rand, s string) string {
	ls := difflib.SplitAfterNewline(s)
	for range 1 + r.IntN(3) {
		i := 0
		if len(ls) > 0 {
			i = r.IntN(len(ls) + 1)
		}
		switch r.IntN(3) {
		case 0:
			ls = append(ls[:i:i], append([]string{fmt.Sprintf("new%d\n", r.IntN(9))}, ls[i:]...)...)
		case 1:
			if i < len(ls) {
				ls = append(ls[:i:i], ls[i+1:]...)
			}
		case 2:
			if i < len(ls) {
				ls[i] = "changed " + ls[i]
			}
		}
	}
	return strings.Join(ls, "")
}

// TestOracleAnswerReproducesTheOracle checks, on many random instances, that
// applying OracleAnswer with the reference's semantics yields exactly the
// oracle contents (so the reward scores it 1.0).
func TestOracleAnswerReproducesTheOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ok := 0
	for n := range 2000 {
		in := &schemas.Instance{ID: fmt.Sprintf("o/r#%d", n), CodeContext: map[string]string{}, OracleNewContent: map[string]string{}}
		for f := range 1 + r.IntN(3) {
			path := fmt.Sprintf("d/f%d.py", f)
			old := randFile(r)
			switch r.IntN(6) {
			case 0: // new file
				in.OracleNewContent[path] = old + "new\n"
			case 1: // deleted file
				in.CodeContext[path] = old
				in.OracleNewContent[path] = ""
			case 2: // relevant, unmodified
				in.CodeContext[path] = old
			default:
				in.CodeContext[path] = old
				in.OracleNewContent[path] = mutate(r, old)
			}
		}
		changes := 0
		for p, c := range in.OracleNewContent {
			if in.CodeContext[p] != c {
				changes++
			}
		}
		out, err := OracleAnswer(in, in.CodeContext)
		if changes == 0 {
			if err == nil {
				t.Fatalf("%s: no change must be an error", in.ID)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v\nctx %q\nnew %q", in.ID, err, in.CodeContext, in.OracleNewContent)
		}
		got := applyRef(t, in.CodeContext, out)
		for p, want := range in.OracleNewContent {
			if in.CodeContext[p] == want {
				continue
			}
			if got[p] != want {
				t.Fatalf("%s %s: got %q want %q\nanswer:\n%s", in.ID, p, got[p], want, out)
			}
		}
		ok++
	}
	if ok < 1000 {
		t.Fatalf("only %d instances exercised", ok)
	}
}

func TestOracleAnswerRefusesDelimiterContent(t *testing.T) {
	in := &schemas.Instance{ID: "o/r#9", CodeContext: map[string]string{"a": "x\n=======\ny\n"},
		OracleNewContent: map[string]string{"a": "x\n=======\nz\n"}}
	if out, err := OracleAnswer(in, in.CodeContext); err == nil {
		applyRef(t, in.CodeContext, out) // must then still be right
	}
	in.OracleNewContent["a"] = "x <think>\n"
	if _, err := OracleAnswer(in, in.CodeContext); err == nil || !strings.Contains(err.Error(), "<think>") {
		t.Fatalf("tag in content: %v", err)
	}
}

func FuzzOracleAnswer(f *testing.F) {
	f.Add("a\nb\n", "a\nc\n")
	f.Add("", "new\n")
	f.Add("x\r\ny", "x\r\n")
	f.Add("a\na\na\n", "a\nb\na\n")
	f.Fuzz(func(t *testing.T, old, newc string) {
		in := &schemas.Instance{ID: "f", CodeContext: map[string]string{"p.py": old}, OracleNewContent: map[string]string{"p.py": newc}}
		out, err := OracleAnswer(in, in.CodeContext)
		if err != nil {
			return
		}
		if got := applyRef(t, in.CodeContext, out); got["p.py"] != newc {
			t.Fatalf("got %q want %q", got["p.py"], newc)
		}
		if _, err := Build(in, Options{MaxPromptBytes: 3000}); err != nil && !errors.Is(err, ErrNoRoom) {
			t.Fatal(err)
		}
	})
}
