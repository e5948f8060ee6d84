package engineapi

import "encoding/json"

// Message is one message of a chat.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Sampling are the parameters the chat and completions requests share.
// Fields left nil are not sent, so a hosted API that rejects a field it
// does not know (top_k) only sees it when it is set.
type Sampling struct {
	N                   *int            `json:"n,omitempty"`
	MaxTokens           *int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	TopK                *int            `json:"top_k,omitempty"`
	Seed                *int64          `json:"seed,omitempty"`
	Stop                json.RawMessage `json:"stop,omitempty"` // a string or a list of strings
}

// StreamOptions is OpenAI's stream_options.
type StreamOptions struct {
	// IncludeUsage adds a last chunk with the usage and no choices.
	IncludeUsage bool `json:"include_usage"`
}

// ChatRequest is a chat-completions request (POST ChatCompletionsPath):
// the subset swerl sends and swerl serve accepts.
type ChatRequest struct {
	Model    string    `json:"model"`
	Messages []Message `json:"messages"`
	Sampling
	Logprobs bool `json:"logprobs"`
	// ReturnTokenIDs is vLLM's extension (also served by swerl serve):
	// prompt_token_ids on the response, token_ids on each choice.
	ReturnTokenIDs bool           `json:"return_token_ids,omitempty"`
	Stream         bool           `json:"stream,omitempty"`
	StreamOptions  *StreamOptions `json:"stream_options,omitempty"`
}

// TokenLogprob is one entry of choices[].logprobs.content.
type TokenLogprob struct {
	Token       string  `json:"token"`
	Logprob     float64 `json:"logprob"`
	Bytes       []int   `json:"bytes"`
	TopLogprobs []any   `json:"top_logprobs"`
}

// ChoiceLogprobs is a chat choice's logprobs.
type ChoiceLogprobs struct {
	Content []TokenLogprob `json:"content"`
}

// Choice is one completion of a ChatResponse.
type Choice struct {
	Index        int             `json:"index"`
	Message      Message         `json:"message"`
	FinishReason string          `json:"finish_reason"`
	Logprobs     *ChoiceLogprobs `json:"logprobs"`
	TokenIDs     []int32         `json:"token_ids,omitempty"`
}

// Usage counts tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Head is what an answer object and each of its streamed chunks begin
// with. SystemFingerprint carries the weight version (Fingerprint).
type Head struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Created           int64  `json:"created"`
	Model             string `json:"model"`
	SystemFingerprint string `json:"system_fingerprint"`
}

// ChatResponse is an OpenAI chat.completion object.
type ChatResponse struct {
	Head
	Choices []Choice `json:"choices"`
	Usage   Usage    `json:"usage"`
	// PromptTokenIDs answers ReturnTokenIDs.
	PromptTokenIDs []int32 `json:"prompt_token_ids,omitempty"`
}

// CompletionRequest is an OpenAI (legacy) completions request (POST
// CompletionsPath): a prompt continued as is, no chat template.
type CompletionRequest struct {
	Model  string          `json:"model"`
	Prompt json.RawMessage `json:"prompt"`
	Sampling
	// Logprobs, when set (0…5), reports each token's log-probability
	// (tokens and token_logprobs; top_logprobs stays null).
	Logprobs       *int           `json:"logprobs,omitempty"`
	Echo           bool           `json:"echo,omitempty"`
	ReturnTokenIDs bool           `json:"return_token_ids,omitempty"`
	Stream         bool           `json:"stream,omitempty"`
	StreamOptions  *StreamOptions `json:"stream_options,omitempty"`
}

// CompletionLogprobs is a completions choice's logprobs.
type CompletionLogprobs struct {
	Tokens        []string  `json:"tokens"`
	TokenLogprobs []float64 `json:"token_logprobs"`
	TopLogprobs   []any     `json:"top_logprobs"`
	TextOffset    []int     `json:"text_offset"`
}

// CompletionChoice is one choice of a text_completion.
type CompletionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *CompletionLogprobs `json:"logprobs"`
	FinishReason string              `json:"finish_reason"`
	TokenIDs     []int32             `json:"token_ids,omitempty"`
}

// CompletionResponse is an OpenAI text_completion object.
type CompletionResponse struct {
	Head
	Choices        []CompletionChoice `json:"choices"`
	Usage          Usage              `json:"usage"`
	PromptTokenIDs []int32            `json:"prompt_token_ids,omitempty"`
}

// Model is one entry of the models listing (GET ModelsPath). vLLM and
// swerl serve list the loaded LoRA adapters too: Root is an adapter's
// folder, Parent the base model's id (nil for the base).
type Model struct {
	ID      string  `json:"id"`
	Object  string  `json:"object"`
	Created int64   `json:"created"`
	OwnedBy string  `json:"owned_by"`
	Root    string  `json:"root"`
	Parent  *string `json:"parent"`
	// MaxModelLen is vLLM's context length of the base model.
	MaxModelLen int `json:"max_model_len,omitempty"`
	// SwerlVersion is the weight version swerl serve serves under this id.
	SwerlVersion int64 `json:"swerl_version"`
}

// ModelList is the answer of GET ModelsPath.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// AdapterRequest is the body of both engines' adapter load and unload
// endpoints (LoadAdapterPath, UnloadAdapterPath; unload sends LoraName
// alone). SGLang adds pinned and lora_id, vLLM load_inplace and
// lora_int_id; swerl does not send them.
type AdapterRequest struct {
	LoraName string `json:"lora_name"`
	LoraPath string `json:"lora_path,omitempty"`
}

// UpdateWeightsRequest is the body of SGLang's UpdateWeightsPath:
// WeightVersion, "swerl-vNNNNNN", becomes the version reported.
type UpdateWeightsRequest struct {
	ModelPath     string `json:"model_path"`
	WeightVersion string `json:"weight_version,omitempty"`
}

// SGLangAdapterAnswer is SGLang's LoRAUpdateOutput, the answer of its
// adapter endpoints.
type SGLangAdapterAnswer struct {
	Success        bool              `json:"success"`
	ErrorMessage   *string           `json:"error_message"`
	LoadedAdapters map[string]string `json:"loaded_adapters"`
}

// UpdateWeightsAnswer is SGLang's answer of UpdateWeightsPath.
type UpdateWeightsAnswer struct {
	Success           bool   `json:"success"`
	Message           string `json:"message"`
	NumPausedRequests int    `json:"num_paused_requests"`
}
