package reward

import (
	"context"
	"math"
	"reflect"
	"strings"
	"testing"

	"swerl/internal/difflib"
)

// answer wraps search/replace blocks in the answer format.
func answer(blocks ...string) string {
	return "<think>fix it</think>\n<solution>\n" + strings.Join(blocks, "\n") + "\n</solution>"
}

func block(path, search, replace string) string {
	return "```python\n### " + path + "\n<<<<<<< SEARCH\n" + search + "\n=======\n" + replace + "\n>>>>>>> REPLACE\n```"
}

// Edge cases of SWE-RL.md §4 (the reference's behaviour, marked [V] there);
// every expected value follows from the stated semantics by hand.
func TestSearchReplaceEdgeCases(t *testing.T) {
	ctx := map[string]string{"a.py": "def add(a, b):\n    return a - b\n"}
	fixed := map[string]string{"a.py": "def add(a, b):\n    return a + b\n"}
	fix := block("a.py", "    return a - b", "    return a + b")
	for _, tc := range []struct {
		name    string
		ctx     map[string]string
		oracle  map[string]string
		output  string
		want    float64
		errPart string
	}{
		{"exact fix", ctx, fixed, answer(fix), 1, ""},
		{"tag twice", ctx, fixed, answer(fix) + "<think>", -1, "count of <think>"},
		{"empty thought", ctx, fixed, "<think> \n</think><solution>" + fix + "</solution>", -1, "Thought is empty"},
		{"tags out of order pass", ctx, fixed, "<solution>\n" + fix + "\n</solution><think>x</think>", 1, ""},
		{"no blocks", ctx, fixed, "<think>x</think><solution>nothing</solution>", -1, "No valid search blocks"},
		{"path not trimmed", ctx, fixed, answer(block("a.py ", "    return a - b", "    return a + b")), -1, "not found"},
		{"empty search needs a blank line", ctx, fixed,
			"<think>x</think><solution>```python\n### b.py\n<<<<<<< SEARCH\n=======\nx = 1\n>>>>>>> REPLACE\n```</solution>", -1, "No valid search blocks"},
		{"search anchored at line start", ctx, fixed, answer(block("a.py", "return a - b", "return a + b")), -1, "not found"},
		{"search may end mid-line", ctx, map[string]string{"a.py": "def add(a, b, c):\n    return a - b\n"},
			answer(block("a.py", "def add(a, b", "def add(a, b, c")), 1, ""},
		{"identical search and replace", ctx, fixed, answer(block("a.py", "    return a - b", "    return a - b")), -1, "identical"},
		{"edits that cancel out score 0", ctx, fixed,
			answer(block("a.py", "    return a - b", "    return a * b"), block("a.py", "    return a * b", "    return a - b")), 0, ""},
		{"cancelled edits with an unchanged oracle score 1", ctx, ctx,
			answer(block("a.py", "    return a - b", "    return a * b"), block("a.py", "    return a * b", "    return a - b")), 1, ""},
		{"new file from an empty search", ctx, map[string]string{"b.py": "x = 1\n"}, answer(block("b.py", "", "x = 1")), 1, ""},
		{"edit to a file not in the context", ctx, fixed, answer(block("c.py", "x", "y")), -1, "not found"},
		{"extra file edited scores 0 for it", map[string]string{"a.py": ctx["a.py"], "r.py": "k = 1\n"}, fixed,
			answer(fix, block("r.py", "k = 1", "k = 2")), 0.5, ""},
		{"line-ending-only change is no change", map[string]string{"a.py": "x\r\ny\r\n"}, map[string]string{"a.py": "x\r\nz\r\n"},
			answer(block("a.py", "x\r", "x")), 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SearchReplace(context.Background(), tc.ctx, tc.oracle, tc.output)
			if math.Abs(got.Reward-tc.want) > 1e-12 {
				t.Fatalf("reward %v (error %q, sims %v), want %v", got.Reward, got.Error, got.Similarities, tc.want)
			}
			if !strings.Contains(got.Error, tc.errPart) || (tc.errPart == "" && got.Error != "") {
				t.Fatalf("error %q, want one containing %q", got.Error, tc.errPart)
			}
		})
	}
}

func TestApplyEditsSemantics(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     string
		edits  []Edit
		want   string
		errMsg string
	}{
		{"replace all occurrences", "x\nx\nyx\n", []Edit{{"f", "x", "z"}}, "z\nz\nyx\n", ""},
		{"sequential edits see earlier ones", "a\n", []Edit{{"f", "a", "b"}, {"f", "b", "c"}}, "c\n", ""},
		{"empty search on an existing file prefixes every line", "a\nb\n", []Edit{{"f", "", "# "}}, "# a\n# b\n# ", ""},
		{"missing file is empty", "", []Edit{{"g", "", "new"}}, "new", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := map[string]string{}
			if tc.in != "" {
				ctx["f"] = tc.in
			}
			got, err := ApplyEdits(ctx, tc.edits)
			if err != nil {
				t.Fatal(err)
			}
			path := tc.edits[0].Path
			if got[path] != tc.want {
				t.Fatalf("got %q, want %q", got[path], tc.want)
			}
		})
	}
}

func TestMalformedBlockIsSwallowedByTheNextOne(t *testing.T) {
	// The first block lacks ">>>>>>> REPLACE": the lazy group runs on into
	// the second block, so one edit comes out whose replace text holds the
	// rest of the first block and the whole second header.
	text := "```python\n### a.py\n<<<<<<< SEARCH\nold\n=======\nnew\n```\n" + block("b.py", "x", "y")
	edits := ParseSearchReplace(text)
	if len(edits) != 1 || edits[0].Path != "a.py" || edits[0].Search != "old" || !strings.Contains(edits[0].Replace, "### b.py") {
		t.Fatalf("got %+v", edits)
	}
}

func TestSimilarityIsAsymmetric(t *testing.T) {
	ab, _ := Similarity(context.Background(), "baaaa", "aaba")
	ba, _ := Similarity(context.Background(), "aaba", "baaaa")
	if math.Abs(ab-4.0/9) > 1e-12 || math.Abs(ba-6.0/9) > 1e-12 {
		t.Fatalf("ratio(baaaa, aaba) = %v, want 4/9; reverse %v, want 6/9", ab, ba)
	}
	// Code points, not bytes: one 4-byte rune against one other is 0, and
	// against itself 1.
	if s, _ := Similarity(context.Background(), "🦙", "🐪"); s != 0 {
		t.Fatalf("different runes: %v, want 0", s)
	}
}

func TestUnidiffEmptyAndGarbage(t *testing.T) {
	for _, tc := range []struct {
		name         string
		oracle, pred []string
		want         float64
	}{
		{"both empty", nil, nil, 1},
		{"garbage vs garbage", []string{"not a diff"}, []string{"neither"}, 1},
		{"model silent", []string{"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"}, nil, 0},
		{"last diff for a path wins", []string{"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"},
			[]string{"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+c\n", "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"}, 1},
	} {
		got := Unidiff(context.Background(), tc.oracle, tc.pred)
		if math.Abs(got.Reward-tc.want) > 1e-12 {
			t.Errorf("%s: %v (%v), want %v", tc.name, got.Reward, got.Similarities, tc.want)
		}
	}
}

// FuzzParseAnswer: no answer, however malformed, panics; a well-formed
// score lies in [0,1] and an error scores exactly −1.
func FuzzParseAnswer(f *testing.F) {
	f.Add(answer(block("a.py", "x", "y")), "x\n")
	f.Add("<think>t</think><solution>```\n### a\n<<<<<<< SEARCH\n\n=======\n\n>>>>>>> REPLACE\n```</solution>", "")
	f.Add("<solution></solution><think></think>", "\xff\xfe")
	f.Add("```python\n### a.py\n<<<<<<< SEARCH\nold\n=======\nnew\n```", "old\n")
	f.Fuzz(func(t *testing.T, output, content string) {
		ctx := map[string]string{"a.py": content, "a": content}
		_, _ = ParseAnswer(output)
		r := SearchReplace(context.Background(), ctx, map[string]string{"a.py": content + "z\n"}, output)
		if r.Error != "" && r.Reward != -1 {
			t.Fatalf("error %q with reward %v", r.Error, r.Reward)
		}
		if r.Error == "" && (r.Reward < 0 || r.Reward > 1 || math.IsNaN(r.Reward)) {
			t.Fatalf("reward %v out of [0,1]", r.Reward)
		}
	})
}

// TestCompareReusesOnlyEqualFiles scores answers whose files partly equal
// the oracle's against the long way round (both patches computed in full,
// every similarity by the matcher): the oracle's diff may only stand in for
// a file whose new text is the oracle's, under the same path.
func TestCompareReusesOnlyEqualFiles(t *testing.T) {
	ctx := context.Background()
	body := func(tag string) string {
		return "def f():\n    return 1\n\n\ndef g(x):\n    return x + " + tag + "\n\nclass C:\n    pass\n"
	}
	codeContext := map[string]string{"a.py": body("1"), "b.py": body("2"), "c.py": body("3"), "d.py": body("4")}
	oracleNew := map[string]string{"a.py": body("10"), "b.py": body("20"), "c.py": body("3")}
	cases := []map[string]string{
		{"a.py": body("10"), "b.py": body("20")},             // both equal the oracle
		{"a.py": body("10"), "b.py": body("21")},             // one equal, one not
		{"a.py": body("20"), "b.py": body("10")},             // the oracle's texts under swapped paths
		{"c.py": body("3"), "d.py": body("40")},              // an unchanged file equal to the oracle's, one the oracle lacks
		{"a.py": body("10") + "x = 1\n", "c.py": body("30")}, // near misses
	}
	for i, predNew := range cases {
		got := Compare(ctx, codeContext, oracleNew, predNew)
		oracle, err := NormalizedPatch(ctx, codeContext, oracleNew)
		if err != nil {
			t.Fatal(err)
		}
		pred, err := NormalizedPatch(ctx, codeContext, predNew)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]float64{}
		for _, m := range []map[string]string{oracle, pred} {
			for path := range m {
				p, o := pred[path], oracle[path]
				if p == "" || o == "" {
					want[path] = 0
					continue
				}
				mt := difflib.NewRunes(p, o, false)
				want[path] = mt.Ratio()
				mt.Release()
			}
		}
		if !reflect.DeepEqual(got.Similarities, want) || got.Reward != mean(want) || got.Error != "" {
			t.Errorf("case %d: got %v (reward %v, error %q), want %v (reward %v)", i, got.Similarities, got.Reward, got.Error, want, mean(want))
		}
	}
}

// TestSimilarityOfEqualTexts checks the shortcut for equal texts against
// the matcher's ratio.
func TestSimilarityOfEqualTexts(t *testing.T) {
	for _, s := range []string{"", "a", "🦙 x\n", strings.Repeat("ab\n", 500)} {
		got, err := Similarity(context.Background(), s, s)
		m := difflib.NewRunes(s, s, false)
		want := m.Ratio()
		m.Release()
		if err != nil || got != want {
			t.Errorf("Similarity(%q, same) = %v, %v; the matcher says %v", s, got, err, want)
		}
	}
}
