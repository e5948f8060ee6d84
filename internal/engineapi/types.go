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
	// TopLogprobs (with Logprobs) lists that many most likely tokens at
	// each position (0…MaxLogprobs).
	TopLogprobs *int `json:"top_logprobs,omitempty"`
	// ReturnTokenIDs is vLLM's extension (also served by swerl serve):
	// prompt_token_ids on the response, token_ids on each choice.
	ReturnTokenIDs bool           `json:"return_token_ids,omitempty"`
	Stream         bool           `json:"stream,omitempty"`
	StreamOptions  *StreamOptions `json:"stream_options,omitempty"`
}

// MaxLogprobs is the most top log-probabilities a request may ask for
// (completions' logprobs and prompt_logprobs, chat's top_logprobs): vLLM's
// default max_logprobs.
const MaxLogprobs = 20

// TopLogprob is one entry of a chat token's top_logprobs.
type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// TokenLogprob is one entry of choices[].logprobs.content. TopLogprobs
// holds TopLogprob values (empty unless top_logprobs is asked).
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
	// Logprobs, when set (0…MaxLogprobs), reports each token's
	// log-probability (tokens, token_logprobs, text_offset) and, above 0,
	// top_logprobs: that many most likely tokens and the one taken.
	Logprobs *int `json:"logprobs,omitempty"`
	// Echo puts the prompt before the completion in text (and in
	// logprobs, scored: the first prompt token's entries are null). With
	// echo, max_tokens may be 0: the prompt alone, scored.
	Echo bool `json:"echo,omitempty"`
	// PromptLogprobs is vLLM's prompt_logprobs (0…MaxLogprobs): each
	// choice's prompt_logprobs, one entry a prompt token (null for the
	// first), keyed by token id, the prompt token and that many most
	// likely ones.
	PromptLogprobs *int           `json:"prompt_logprobs,omitempty"`
	ReturnTokenIDs bool           `json:"return_token_ids,omitempty"`
	Stream         bool           `json:"stream,omitempty"`
	StreamOptions  *StreamOptions `json:"stream_options,omitempty"`
}

// CompletionLogprobs is a completions choice's logprobs. A token_logprobs
// entry is null, and its top_logprobs entry too, for the first token of
// an echoed prompt (nothing predicts it); top_logprobs is null without
// logprobs above 0, else a map from token text to log-probability a
// token.
type CompletionLogprobs struct {
	Tokens        []string   `json:"tokens"`
	TokenLogprobs []*float64 `json:"token_logprobs"`
	TopLogprobs   []any      `json:"top_logprobs"`
	TextOffset    []int      `json:"text_offset"`
}

// PromptLogprob is one token of a vLLM prompt_logprobs entry: its
// log-probability, its rank among all tokens (1: the most likely) and its
// text.
type PromptLogprob struct {
	Logprob      float64 `json:"logprob"`
	Rank         int     `json:"rank"`
	DecodedToken string  `json:"decoded_token"`
}

// CompletionChoice is one choice of a text_completion.
type CompletionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *CompletionLogprobs `json:"logprobs"`
	FinishReason string              `json:"finish_reason"`
	TokenIDs     []int32             `json:"token_ids,omitempty"`
	// PromptTokenIDs answers ReturnTokenIDs: the choice's prompt, on each
	// choice as vLLM puts it (a batch of prompts has one per prompt).
	PromptTokenIDs []int32 `json:"prompt_token_ids,omitempty"`
	// PromptLogprobs answers prompt_logprobs: per prompt token, null for
	// the first, else a map from token id (a JSON string) to its entry.
	PromptLogprobs []map[string]PromptLogprob `json:"prompt_logprobs,omitempty"`
}

// CompletionResponse is an OpenAI text_completion object.
type CompletionResponse struct {
	Head
	Choices []CompletionChoice `json:"choices"`
	Usage   Usage              `json:"usage"`
}

// Paths of vLLM's tokenizer endpoints, which swerl serve answers too.
const (
	TokenizePath   = "/tokenize"
	DetokenizePath = "/detokenize"
)

// TokenizeRequest is the body of TokenizePath: a prompt, or chat messages
// rendered with the model's chat template (with the generation prompt
// unless add_generation_prompt is false). AddSpecialTokens (default true
// for a prompt, false for messages, as vLLM) asks for the tokens the
// tokenizer's post-processor adds, such as a BOS.
type TokenizeRequest struct {
	Model               string    `json:"model,omitempty"`
	Prompt              *string   `json:"prompt,omitempty"`
	Messages            []Message `json:"messages,omitempty"`
	AddGenerationPrompt *bool     `json:"add_generation_prompt,omitempty"`
	AddSpecialTokens    *bool     `json:"add_special_tokens,omitempty"`
	ReturnTokenStrs     bool      `json:"return_token_strs,omitempty"`
}

// TokenizeResponse is the answer of TokenizePath.
type TokenizeResponse struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []int32  `json:"tokens"`
	TokenStrs   []string `json:"token_strs,omitempty"`
}

// DetokenizeRequest is the body of DetokenizePath.
type DetokenizeRequest struct {
	Model  string  `json:"model,omitempty"`
	Tokens []int32 `json:"tokens"`
}

// DetokenizeResponse is the answer of DetokenizePath.
type DetokenizeResponse struct {
	Prompt string `json:"prompt"`
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
	// MaxModelLen is vLLM's context length of the base model: prompt and
	// completion together, the limit swerl serve enforces.
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
