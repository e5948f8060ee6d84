// Package fakeengine holds test doubles of the inference engines'
// weight-sync APIs, vLLM's and SGLang's, written to their public API
// documentation and server code, for tests of the packages that push
// versions to engines (sinks/weightsync, pipelines/rl). Each double is an
// http.Handler; its exported fields are what a test reads and steers,
// under Mu.
package fakeengine

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// The doubles implement the request and answer shapes of the engines'
// adapter and weight APIs as their public API documentation and server
// code give them (vLLM: vllm/entrypoints/openai/serving_models.py and
// api_server.py; SGLang: python/sglang/srt/entrypoints/http_server.py and
// managers/io_struct.py), since neither engine runs here. Each request is
// decoded strictly: a field the engine does not declare is an error (both
// servers validate bodies with pydantic; SGLang's dataclasses take exactly
// these fields).

// Call is one request an engine received.
type Call struct {
	Method, Path string
	Body         map[string]any
}

// VLLM is vLLM's OpenAI server with --enable-lora and
// VLLM_ALLOW_RUNTIME_LORA_UPDATING=True.
// It lists the base and the loaded adapters on GET /v1/models. The zero
// value is ready; set fields before serving or under Mu.
type VLLM struct {
	Mu       sync.Mutex
	Calls    []Call            // every POST it decoded, in order
	Loaded   map[string]string // lora_name → lora_path
	NewShape bool              // answer errors as {"error":{…}} (vLLM ≥ 0.10) instead of {"object":"error",…}
	Chats    int               // chat completions answered (POST /v1/chat/completions)
	// Fail, when set, sees each call (n counts them from 1); a status
	// other than 0 is answered as an error with the message instead.
	Fail func(n int, c Call) (status int, msg string)
}

func (v *VLLM) errorAnswer(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if v.NewShape {
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": status}})
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"object": "error", "message": msg, "type": typ, "param": nil, "code": status})
}

// decodeStrict decodes a JSON body that holds no field but fields.
func decodeStrict(r *http.Request, fields ...string) (map[string]any, error) {
	var m map[string]any
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		return nil, err
	}
	for k := range m {
		if !slices.Contains(fields, k) {
			return nil, fmt.Errorf("extra field %q", k)
		}
	}
	return m, nil
}

// ServeHTTP answers GET /v1/models, POST /v1/load_lora_adapter, POST
// /v1/unload_lora_adapter and POST /v1/chat/completions as vLLM does.
func (v *VLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v.Mu.Lock()
	defer v.Mu.Unlock()
	if v.Loaded == nil {
		v.Loaded = map[string]string{}
	}
	if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
		// ModelList: the base, then one card a loaded adapter (root: its
		// path, parent: the base).
		data := []map[string]any{{"id": "base", "object": "model", "root": "/models/base", "parent": nil}}
		for name, path := range v.Loaded {
			data = append(data, map[string]any{"id": name, "object": "model", "root": path, "parent": "base"})
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
		return
	}
	if r.Method != http.MethodPost {
		v.errorAnswer(w, 405, "MethodNotAllowed", "Method Not Allowed")
		return
	}
	var fields []string
	switch r.URL.Path {
	case "/v1/chat/completions":
		v.chat(w, r)
		return
	case "/v1/load_lora_adapter":
		fields = []string{"lora_name", "lora_path", "load_inplace"}
	case "/v1/unload_lora_adapter":
		fields = []string{"lora_name", "lora_int_id"}
	default:
		v.errorAnswer(w, 404, "NotFoundError", "Not Found")
		return
	}
	body, err := decodeStrict(r, fields...)
	if err != nil {
		v.errorAnswer(w, 422, "BadRequestError", err.Error())
		return
	}
	c := Call{r.Method, r.URL.Path, body}
	v.Calls = append(v.Calls, c)
	if v.Fail != nil {
		if status, msg := v.Fail(len(v.Calls), c); status != 0 {
			v.errorAnswer(w, status, "BadRequestError", msg)
			return
		}
	}
	name, _ := body["lora_name"].(string)
	if r.URL.Path == "/v1/load_lora_adapter" {
		path, _ := body["lora_path"].(string)
		if name == "" || path == "" {
			v.errorAnswer(w, 400, "InvalidUserInput", "Both 'lora_name' and 'lora_path' must be provided.")
			return
		}
		if _, ok := v.Loaded[name]; ok {
			v.errorAnswer(w, 400, "InvalidUserInput", fmt.Sprintf("The lora adapter '%s' has already been loaded.", name))
			return
		}
		if _, err := os.Stat(filepath.Join(path, "adapter_config.json")); err != nil {
			v.errorAnswer(w, 404, "NotFoundError", fmt.Sprintf("No adapter found for %s", path))
			return
		}
		v.Loaded[name] = path
		io.WriteString(w, fmt.Sprintf("Success: LoRA adapter '%s' added successfully.", name))
		return
	}
	if _, ok := v.Loaded[name]; !ok {
		v.errorAnswer(w, 404, "NotFoundError", fmt.Sprintf("The lora adapter '%s' cannot be found.", name))
		return
	}
	delete(v.Loaded, name)
	io.WriteString(w, fmt.Sprintf("Success: LoRA adapter '%s' removed successfully.", name))
}

// chat answers a chat completion as vLLM does for the model named: the
// base ("base") or a loaded adapter, each choice's text naming the model;
// any other name is vLLM's 404 ("The model `X` does not exist."). Chats
// counts the answered ones.
func (v *VLLM) chat(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string `json:"model"`
		N     int    `json:"n"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		v.errorAnswer(w, 400, "BadRequestError", err.Error())
		return
	}
	if _, ok := v.Loaded[req.Model]; !ok && req.Model != "base" {
		v.errorAnswer(w, 404, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", req.Model))
		return
	}
	v.Chats++
	var choices []map[string]any
	for i := range max(req.N, 1) {
		choices = append(choices, map[string]any{"index": i, "finish_reason": "stop",
			"message": map[string]string{"role": "assistant", "content": "from " + req.Model}})
	}
	json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "model": req.Model, "choices": choices})
}

// SGLang is SGLang's server with --enable-lora.
// The zero value is ready; set fields before serving or under Mu.
type SGLang struct {
	Mu     sync.Mutex
	Calls  []Call            // every POST it decoded, in order
	Loaded map[string]string // lora_name → lora_path
	Model  string            // the model_path update_weights_from_disk last loaded
	// Fail, when set, sees each call (n counts them from 1); a status
	// other than 0 is answered with the JSON body instead.
	Fail func(n int, c Call) (status int, body map[string]any)
}

// ServeHTTP answers POST /load_lora_adapter, /unload_lora_adapter and
// /update_weights_from_disk as SGLang does.
func (g *SGLang) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.Mu.Lock()
	defer g.Mu.Unlock()
	if g.Loaded == nil {
		g.Loaded = map[string]string{}
	}
	answer := func(status int, m map[string]any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(m)
	}
	var fields []string
	switch r.URL.Path {
	case "/load_lora_adapter":
		fields = []string{"lora_name", "lora_path", "pinned", "lora_id"}
	case "/unload_lora_adapter":
		fields = []string{"lora_name", "lora_id"}
	case "/update_weights_from_disk":
		fields = []string{"model_path", "load_format", "abort_all_requests", "weight_version", "is_async", "torch_empty_cache", "keep_pause", "token_step", "flush_cache"}
	default:
		answer(404, map[string]any{"detail": "Not Found"})
		return
	}
	if r.Method != http.MethodPost {
		answer(405, map[string]any{"detail": "Method Not Allowed"})
		return
	}
	body, err := decodeStrict(r, fields...)
	if err != nil {
		answer(422, map[string]any{"detail": []any{map[string]any{"msg": err.Error()}}})
		return
	}
	c := Call{r.Method, r.URL.Path, body}
	g.Calls = append(g.Calls, c)
	if g.Fail != nil {
		if status, m := g.Fail(len(g.Calls), c); status != 0 {
			answer(status, m)
			return
		}
	}
	name, _ := body["lora_name"].(string)
	switch r.URL.Path {
	case "/load_lora_adapter":
		path, _ := body["lora_path"].(string)
		if _, ok := g.Loaded[name]; ok {
			answer(400, map[string]any{"success": false, "error_message": fmt.Sprintf("LoRA adapter with name %s already exists", name), "loaded_adapters": nil})
			return
		}
		if _, err := os.Stat(filepath.Join(path, "adapter_config.json")); err != nil {
			answer(400, map[string]any{"success": false, "error_message": "Failed to load LoRA adapter " + name + ": no adapter_config.json in " + path, "loaded_adapters": nil})
			return
		}
		g.Loaded[name] = path
	case "/unload_lora_adapter":
		if _, ok := g.Loaded[name]; !ok {
			answer(400, map[string]any{"success": false, "error_message": fmt.Sprintf("LoRA adapter %s is not loaded", name), "loaded_adapters": nil})
			return
		}
		delete(g.Loaded, name)
	case "/update_weights_from_disk":
		p, _ := body["model_path"].(string)
		if _, err := os.Stat(filepath.Join(p, "config.json")); err != nil {
			answer(400, map[string]any{"success": false, "message": "Failed to get weights iterator: " + err.Error(), "num_paused_requests": 0})
			return
		}
		g.Model = p
		answer(200, map[string]any{"success": true, "message": "Succeeded to update model weights.", "num_paused_requests": 0})
		return
	}
	loaded := map[string]any{}
	for k, v := range g.Loaded {
		loaded[k] = v
	}
	answer(200, map[string]any{"success": true, "error_message": nil, "loaded_adapters": loaded})
}
