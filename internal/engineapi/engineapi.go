package engineapi

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Kind says which weight API an engine speaks.
type Kind string

// The engines swerl syncs. swerl serve answers both APIs.
const (
	VLLM   Kind = "vllm"
	SGLang Kind = "sglang"
)

// Valid reports whether k is a kind swerl speaks to.
func (k Kind) Valid() bool { return k == VLLM || k == SGLang }

// KindError is the error of a kind that is neither VLLM nor SGLang.
func KindError(k Kind) error { return fmt.Errorf("kind %q, want %s or %s", k, VLLM, SGLang) }

// Endpoints of the OpenAI-compatible API, relative to the server root.
const (
	ChatCompletionsPath = "/v1/chat/completions"
	CompletionsPath     = "/v1/completions"
	ModelsPath          = "/v1/models"
	// HealthPath answers 200 while the server is up (swerl serve, vLLM,
	// SGLang).
	HealthPath = "/health"
	// UpdateWeightsPath is SGLang's full-weight reload
	// (UpdateWeightsRequest).
	UpdateWeightsPath = "/update_weights_from_disk"
	// CollectiveRPCPath is vLLM's call of a method on every worker
	// (CollectiveRPCRequest), served only with VLLM_SERVER_DEV_MODE=1;
	// its workers' reload_weights loads full weights from a folder in
	// place.
	CollectiveRPCPath = "/collective_rpc"
)

// CollectiveRPCRequest is the body of vLLM's CollectiveRPCPath.
type CollectiveRPCRequest struct {
	Method string         `json:"method"`
	Kwargs map[string]any `json:"kwargs,omitempty"`
}

// ReloadWeights is the body that makes vLLM's workers load the full
// weights of the Hugging Face folder dir in place (their reload_weights).
func ReloadWeights(dir string) CollectiveRPCRequest {
	return CollectiveRPCRequest{Method: "reload_weights", Kwargs: map[string]any{"weights_path": dir}}
}

// LoadAdapterPath is the endpoint that loads a LoRA adapter
// (AdapterRequest) on an engine of kind k.
func LoadAdapterPath(k Kind) string {
	if k == VLLM {
		return "/v1/load_lora_adapter"
	}
	return "/load_lora_adapter"
}

// UnloadAdapterPath is the endpoint that unloads a LoRA adapter
// (AdapterRequest with LoraName alone) on an engine of kind k.
func UnloadAdapterPath(k Kind) string {
	if k == VLLM {
		return "/v1/unload_lora_adapter"
	}
	return "/unload_lora_adapter"
}

// VersionHeader is the response header an inference server sets to the
// weight version it serves.
const VersionHeader = "X-Swerl-Policy-Version"

// Fingerprint returns the system_fingerprint of a weight version:
// "swerl-v<N>".
func Fingerprint(version int64) string { return "swerl-v" + strconv.FormatInt(version, 10) }

// ParseVersion reads a weight version from the VersionHeader value or, when
// that is absent, from a system_fingerprint "swerl-v<N>"; -1 when neither
// holds one.
func ParseVersion(header, fingerprint string) int64 {
	if v, err := strconv.ParseInt(strings.TrimSpace(header), 10, 64); err == nil && v >= 0 {
		return v
	}
	if s, ok := strings.CutPrefix(fingerprint, "swerl-v"); ok {
		if v, err := strconv.ParseInt(s, 10, 64); err == nil && v >= 0 {
			return v
		}
	}
	return -1
}

// AdapterPrefix starts the name of every weight version's LoRA adapter on an
// inference engine: "swerl-v" and the version as in its checkpoint folder
// (v%06d).
const AdapterPrefix = "swerl-v"

// AdapterName is the adapter name of a weight version: "swerl-v000123".
func AdapterName(version int64) string { return fmt.Sprintf("%s%06d", AdapterPrefix, version) }

// ParseAdapter reads the version of an adapter name: "swerl-v000123", or
// SGLang's "BASE:swerl-v000123". It reports false for anything else.
func ParseAdapter(model string) (int64, bool) {
	if i := strings.LastIndexByte(model, ':'); i >= 0 {
		model = model[i+1:]
	}
	s, ok := strings.CutPrefix(model, AdapterPrefix)
	if !ok || s == "" {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// AdapterModel is the model field of a request for adapter on an engine of
// kind k serving base: the adapter's name for vLLM (and swerl serve),
// "BASE:adapter" for SGLang.
func AdapterModel(k Kind, base, adapter string) string {
	if k == SGLang {
		return base + ":" + adapter
	}
	return adapter
}

// BaseURL is the server root of an engine URL or HTTP policy spec: the
// query and a trailing /chat/completions and /v1 removed
// ("http://h:8000/v1?model=m" → "http://h:8000").
func BaseURL(spec string) string {
	s, _, _ := strings.Cut(spec, "?")
	s = strings.TrimSuffix(s, "/")
	s = strings.TrimSuffix(s, "/chat/completions")
	s = strings.TrimSuffix(s, "/v1")
	return strings.TrimSuffix(s, "/")
}

// ServedVersion is what an engine serves after a weight sync: a LoRA
// adapter (Adapter names it), or full weights (Adapter empty).
type ServedVersion struct {
	Version int64
	Adapter string
}

// KeyEnv names the environment variables an engine's API key is read
// from by default, the first one set and not empty winning. The key is
// read where the requests are sent (on a Beam worker, by that worker), so
// it never travels in a job graph or a spec.
var KeyEnv = []string{"SWERL_API_KEY", "OPENAI_API_KEY"}

// APIKey reads an engine's API key from the first of the environment
// variables names (KeyEnv when none is given) that is set and not empty;
// "" when none is. This is the one place swerl reads an API key.
func APIKey(names ...string) string {
	if len(names) == 0 {
		names = KeyEnv
	}
	for _, n := range names {
		if k := os.Getenv(n); k != "" {
			return k
		}
	}
	return ""
}

// Bearer is the Authorization header value of key.
func Bearer(key string) string { return "Bearer " + key }
