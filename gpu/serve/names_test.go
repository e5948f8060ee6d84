package serve

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"swerl/sinks/weightsync"
)

// modelIDs lists the ids /v1/models answers.
func modelIDs(t *testing.T, url string) []string {
	t.Helper()
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var models struct{ Data []struct{ ID string } }
	if err := json.NewDecoder(resp.Body).Decode(&models); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.ID)
	}
	return ids
}

// An adapter cannot take the base model's id (requests for the base would
// get the adapter, and /v1/models would list the id twice) nor a loaded
// adapter's name, and its name is bounded: each is a 400 on both engines'
// endpoints that does not echo an oversized name, and the base keeps
// answering as the base.
func TestAdapterNamesAreChecked(t *testing.T) {
	srv, _, _ := startAdapters(t) // the base's id is "tiny"
	a := adapterDir(t, "1.5")
	req := map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 6, "seed": 3, "logprobs": true}
	_, base, _ := post(t, srv.URL, req)

	long := strings.Repeat("n", 10<<10)
	for _, path := range []string{"/v1/load_lora_adapter", "/load_lora_adapter"} {
		for _, tc := range []struct{ name, msg string }{
			{"tiny", "base model's id"},
			{long, "lora_name of 10240 bytes"},
			{"a\nb", "control character"},
		} {
			code, body := postJSON(t, srv.URL+path, map[string]string{"lora_name": tc.name, "lora_path": a})
			if msg := weightsync.Message([]byte(body)); code != 400 || !strings.Contains(msg, tc.msg) || len(body) > 1024 {
				t.Errorf("%s %.20q: %d %.300s; want 400 %q in at most 1 KiB", path, tc.name, code, body, tc.msg)
			}
		}
	}
	code, body := postJSON(t, srv.URL+"/v1/unload_lora_adapter", map[string]string{"lora_name": long})
	if code != 400 || len(body) > 1024 {
		t.Errorf("unload of a 10 KB name: %d %.300s", code, body)
	}
	// A name at the bound loads, once.
	ok := strings.Repeat("a", MaxAdapterName)
	if code, body := postJSON(t, srv.URL+"/v1/load_lora_adapter", map[string]string{"lora_name": ok, "lora_path": a}); code != 200 {
		t.Fatalf("a name of %d bytes: %d %s", MaxAdapterName, code, body)
	}
	code, body = postJSON(t, srv.URL+"/v1/load_lora_adapter", map[string]string{"lora_name": ok, "lora_path": a})
	if code != 400 || !strings.Contains(body, "has already been loaded") {
		t.Fatalf("loaded twice: %d %.300s", code, body)
	}
	if ids := modelIDs(t, srv.URL); !slices.Equal(ids, []string{"tiny", ok}) {
		t.Fatalf("models %.100q", ids)
	}
	for _, model := range []string{"", "tiny"} {
		req["model"] = model
		_, got, _ := post(t, srv.URL, req)
		if got.SystemFingerprint != "swerl-v-1" || !slices.Equal(logprobsOf(got), logprobsOf(base)) {
			t.Fatalf("model %q is no longer the base: fingerprint %q", model, got.SystemFingerprint)
		}
	}
}
