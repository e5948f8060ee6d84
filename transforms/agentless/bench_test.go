package agentless

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"swerl/internal/testenv"
	"swerl/transforms/rollout"
)

// flaskApply returns the first apply vector of a flask row: its file and
// the gold answer.
func flaskApply(b *testing.B) (map[string]string, string) {
	sc := bufio.NewScanner(vectorsReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	for sc.Scan() {
		var v vector
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			b.Fatal(err)
		}
		if v.Kind == "apply" && strings.HasPrefix(v.ID, "pallets__flask-") {
			return v.Files, v.Edits
		}
	}
	b.Fatal("no flask apply vector")
	return nil, ""
}

// BenchmarkSolveFlask solves one flask instance with 50 repair samples
// (all the gold answer) through a loopback OpenAI-compatible server, so
// that the time is swerl's: prompts, edit application, parsing,
// unparsing, normalizing and the vote over real flask modules.
func BenchmarkSolveFlask(b *testing.B) {
	files, answer := flaskApply(b)
	url := testenv.ChatServer(b, func(prompt string, n int) ([]string, int) {
		var texts []string
		if strings.Contains(prompt, "### Repository Structure ###") {
			for p := range files {
				texts = append(texts, "```\n"+p+"\n```")
			}
			return texts, 0
		}
		for range n {
			texts = append(texts, answer)
		}
		return texts, 0
	})
	pol, err := rollout.Open(url)
	if err != nil {
		b.Fatal(err)
	}
	defer pol.Close()
	in := Instance{ID: "pallets__flask-1", Problem: "x", Files: files}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := Solve(context.Background(), pol, in, Options{RepairSamples: 50})
		if err != nil {
			b.Fatal(err)
		}
		if out.Prediction.ModelPatch == "" {
			b.Fatal("no prediction")
		}
		b.ReportMetric(float64(out.PolicyTime.Milliseconds()), "policy-ms/op")
	}
}
