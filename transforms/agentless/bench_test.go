package agentless

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"swerl/transforms/rollout"
)

// flaskApply returns the first apply vector of a flask row: its file and
// the gold answer.
func flaskApply(b *testing.B) (map[string]string, string) {
	sc := bufio.NewScanner(vectorsReaderB(b))
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
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
			N        int                        `json:"n"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		var texts []string
		if strings.Contains(req.Messages[0].Content, "### Repository Structure ###") {
			for p := range files {
				texts = append(texts, "```\n"+p+"\n```")
			}
		} else {
			for i := 0; i < req.N; i++ {
				texts = append(texts, answer)
			}
		}
		var choices []map[string]any
		for i, s := range texts {
			choices = append(choices, map[string]any{"index": i, "finish_reason": "stop", "message": map[string]string{"role": "assistant", "content": s}})
		}
		json.NewEncoder(w).Encode(map[string]any{"model": "fake", "choices": choices})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	pol, err := rollout.Open("http://" + ln.Addr().String() + "/v1")
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
