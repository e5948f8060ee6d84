// Command decode measures an OpenAI-compatible server's decode throughput
// at several batch sizes: for each, it sends that many /v1/completions
// requests at once (n = 1 each, the same prompt with a different seed,
// temperature 1, max_tokens completion tokens) and reports the completion
// tokens the answers count (usage.completion_tokens) over the wall time,
// best of -rounds, after one warm-up request. bench/peers/decode.sh runs it against vLLM and swerl
// serve on the same model and machine.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	url := flag.String("url", "", "the server's OpenAI base, http://host:port/v1")
	model := flag.String("model", "base", "the model name requests give")
	batches := flag.String("batch", "1,8,32", "batch sizes: requests in flight at once")
	tokens := flag.Int("tokens", 64, "completion tokens a request asks for")
	rounds := flag.Int("rounds", 2, "rounds a batch size; the best is reported")
	name := flag.String("name", "", "label of the output lines")
	flag.Parse()
	if *url == "" {
		fmt.Fprintln(os.Stderr, "decode: -url is required")
		os.Exit(2)
	}
	client := &http.Client{Timeout: 20 * time.Minute}
	prompt := "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
	// A warm-up request first: a server's first answers pay for lazy
	// initialization that no later batch does.
	if _, err := complete(client, *url, *model, prompt, *tokens, 0); err != nil {
		fmt.Fprintf(os.Stderr, "decode: warm-up: %v\n", err)
		os.Exit(1)
	}
	for _, f := range strings.Split(*batches, ",") {
		b, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || b < 1 {
			fmt.Fprintf(os.Stderr, "decode: -batch %q: want positive counts\n", *batches)
			os.Exit(2)
		}
		best := 0.0
		for r := range *rounds {
			var wg sync.WaitGroup
			var mu sync.Mutex
			total := 0
			var firstErr error
			start := time.Now()
			for i := range b {
				wg.Add(1)
				go func() {
					defer wg.Done()
					n, err := complete(client, *url, *model, prompt, *tokens, int64(r*1000+i+1))
					mu.Lock()
					defer mu.Unlock()
					total += n
					if err != nil && firstErr == nil {
						firstErr = err
					}
				}()
			}
			wg.Wait()
			if firstErr != nil {
				fmt.Fprintf(os.Stderr, "decode: batch %d: %v\n", b, firstErr)
				os.Exit(1)
			}
			best = max(best, float64(total)/time.Since(start).Seconds())
		}
		fmt.Printf("%s batch %d: %.1f tokens/s\n", *name, b, best)
	}
}

// complete sends one request and returns its completion tokens.
func complete(c *http.Client, url, model, prompt string, tokens int, seed int64) (int, error) {
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": prompt, "max_tokens": tokens, "temperature": 1,
		"seed": seed, "ignore_eos": true})
	resp, err := c.Post(url+"/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, fmt.Errorf("HTTP %d: %v", resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return out.Usage.CompletionTokens, nil
}
