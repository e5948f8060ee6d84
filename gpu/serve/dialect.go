package serve

// vLLM's dialect where clients rely on it: prompts given as token ids (or
// several prompts at once), echo with the prompt scored and max_tokens 0
// (lm-evaluation-harness's loglikelihood requests), prompt_logprobs, top
// log-probabilities up to engineapi.MaxLogprobs, and the /tokenize and
// /detokenize endpoints. A prompt is scored by the policy's own sampler:
// its first token is the prompt and the others are forced tokens
// (gpu.SamplingParams.Forced), so prompt and completion log-probabilities
// come from the same numerics.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"swerl/gpu"
	"swerl/gpu/tokenizer"
	"swerl/internal/engineapi"
)

// textPrompt is one prompt of a completions request: its token ids and
// its text (the string sent, or the ids decoded).
type textPrompt struct {
	ids  []int32
	text string
}

// parsePrompts reads a completions prompt as OpenAI's API takes it: a
// string, a list of strings, a list of token ids, or a list of lists of
// token ids. Token ids must be below vocab (the model's vocabulary).
func parsePrompts(raw json.RawMessage, tok *tokenizer.Tokenizer, vocab int) ([]textPrompt, *apiError) {
	const want = "prompt must be a string, a list of strings, a list of token ids or a list of lists of token ids"
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("prompt", "prompt is missing")
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, badRequest("prompt", "prompt is empty")
		}
		return []textPrompt{{ids: tok.Encode(one), text: one}}, nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil, badRequest("prompt", want)
	}
	if len(list) == 0 {
		return nil, badRequest("prompt", "prompt is an empty list")
	}
	var ids []int32
	if json.Unmarshal(raw, &ids) == nil {
		p, err := idPrompt(tok, ids, vocab, "prompt")
		if err != nil {
			return nil, err
		}
		return []textPrompt{p}, nil
	}
	out := make([]textPrompt, 0, len(list))
	for i, item := range list {
		if json.Unmarshal(item, &one) == nil {
			if one == "" {
				return nil, badRequest("prompt", "prompt[%d] is empty", i)
			}
			out = append(out, textPrompt{ids: tok.Encode(one), text: one})
			continue
		}
		var itemIDs []int32 // a new slice each: Unmarshal reuses one's array
		if json.Unmarshal(item, &itemIDs) != nil {
			return nil, badRequest("prompt", "prompt[%d]: %s", i, want)
		}
		p, err := idPrompt(tok, itemIDs, vocab, fmt.Sprintf("prompt[%d]", i))
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// idPrompt is a prompt of token ids, checked against the vocabulary;
// where names it in errors.
func idPrompt(tok *tokenizer.Tokenizer, ids []int32, vocab int, where string) (textPrompt, *apiError) {
	if len(ids) == 0 {
		return textPrompt{}, badRequest("prompt", "%s is an empty list of token ids", where)
	}
	for j, id := range ids {
		if id < 0 || int(id) >= vocab {
			return textPrompt{}, badRequest("prompt", "%s[%d]: token id %d outside the vocabulary 0..%d", where, j, id, vocab-1)
		}
	}
	return textPrompt{ids: ids, text: decodeText(tok, ids)}, nil
}

// decodeText is the text of ids, special tokens included, an id the
// tokenizer lacks written as U+FFFD, made valid UTF-8.
func decodeText(tok *tokenizer.Tokenizer, ids []int32) string {
	var b []byte
	for _, id := range ids {
		var err error
		if b, err = tok.DecodeBytes(b, []int32{id}, true); err != nil {
			b = append(b, "\uFFFD"...)
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// tokenText is how one token appears in a logprobs entry: its bytes
// (a special token's text too) and that made valid UTF-8.
func tokenText(tok *tokenizer.Tokenizer, id int32) ([]byte, string) {
	b, err := tok.DecodeBytes(nil, []int32{id}, true)
	if err != nil {
		b = []byte("\uFFFD")
	}
	return b, strings.ToValidUTF8(string(b), "\uFFFD")
}

// checkLogprobs refuses a top log-probabilities count outside
// 0..MaxLogprobs, naming field.
func checkLogprobs(field string, n *int) *apiError {
	if n != nil && (*n < 0 || *n > engineapi.MaxLogprobs) {
		return badRequest(field, "%s %d outside 0..%d (the most log-probabilities a token this server returns)", field, *n, engineapi.MaxLogprobs)
	}
	return nil
}

// promptTooLong is the error of a prompt of n tokens that does not leave
// need tokens of room in a context of maxLen.
func promptTooLong(param string, n, need, maxLen int) *apiError {
	if need == 0 {
		return badRequest(param, "the prompt has %d tokens; max_model_len is %d", n, maxLen)
	}
	return badRequest(param, "the prompt has %d tokens; max_model_len is %d, and prompt and completion (at least %d token) must fit in it", n, maxLen, need)
}

// topMap is a completions top_logprobs entry: the token taken and the n
// most likely tokens of top, by text. Tokens whose texts are equal (bytes
// of an incomplete UTF-8 character all read U+FFFD) share one entry: the
// taken token's, so that top_logprobs[i][tokens[i]] is always
// token_logprobs[i], else the most likely one's.
func topMap(tok *tokenizer.Tokenizer, top []gpu.TokenLogProb, n int, taken int32, lp float32) map[string]float64 {
	m := make(map[string]float64, n+1)
	_, s := tokenText(tok, taken)
	m[s] = float64(lp)
	for _, e := range top[:min(n, len(top))] {
		_, s := tokenText(tok, e.ID)
		if _, ok := m[s]; !ok {
			m[s] = float64(e.LogProb)
		}
	}
	return m
}

// chatTop is a chat token's top_logprobs: the n most likely tokens.
func chatTop(tok *tokenizer.Tokenizer, top []gpu.TokenLogProb, n int) []any {
	out := make([]any, 0, n)
	for _, e := range top[:min(n, len(top))] {
		b, s := tokenText(tok, e.ID)
		out = append(out, engineapi.TopLogprob{Token: s, Logprob: float64(e.LogProb), Bytes: byteInts(b)})
	}
	return out
}

func byteInts(b []byte) []int {
	out := make([]int, len(b))
	for i, x := range b {
		out[i] = int(x)
	}
	return out
}

// promptScores are the scores of a prompt's tokens after the first:
// log-probabilities, the sampler's top tokens and ranks.
type promptScores struct {
	logprobs []float32
	top      [][]gpu.TokenLogProb
	ranks    []int32
}

// promptLogprobs is vLLM's prompt_logprobs of ids: null for the first
// token, then each token and the k most likely, keyed by id.
func promptLogprobs(tok *tokenizer.Tokenizer, ids []int32, sc promptScores, k int) []map[string]engineapi.PromptLogprob {
	out := make([]map[string]engineapi.PromptLogprob, len(ids))
	for j := 1; j < len(ids) && j-1 < len(sc.logprobs); j++ {
		m := make(map[string]engineapi.PromptLogprob, k+1)
		_, s := tokenText(tok, ids[j])
		rank := 0
		if j-1 < len(sc.ranks) {
			rank = int(sc.ranks[j-1])
		}
		m[strconv.Itoa(int(ids[j]))] = engineapi.PromptLogprob{Logprob: float64(sc.logprobs[j-1]), Rank: rank, DecodedToken: s}
		if j-1 < len(sc.top) {
			for r, e := range sc.top[j-1][:min(k, len(sc.top[j-1]))] {
				key := strconv.Itoa(int(e.ID))
				if _, ok := m[key]; !ok {
					_, s := tokenText(tok, e.ID)
					m[key] = engineapi.PromptLogprob{Logprob: float64(e.LogProb), Rank: r + 1, DecodedToken: s}
				}
			}
		}
		out[j] = m
	}
	return out
}

// echoLogprobs appends the entries of an echoed prompt to lp: the first
// token's log-probability and top entry null, the others scored. The
// offsets are in bytes of the echoed text, which holds the prompt's
// special tokens as text.
func echoLogprobs(tok *tokenizer.Tokenizer, lp *engineapi.CompletionLogprobs, ids []int32, sc promptScores, top int) {
	off := 0
	for j, id := range ids {
		b, s := tokenText(tok, id)
		lp.Tokens = append(lp.Tokens, s)
		lp.TextOffset = append(lp.TextOffset, off)
		off += len(b)
		if j == 0 || j-1 >= len(sc.logprobs) {
			lp.TokenLogprobs = append(lp.TokenLogprobs, nil)
			if top > 0 {
				lp.TopLogprobs = append(lp.TopLogprobs, nil)
			}
			continue
		}
		v := float64(sc.logprobs[j-1])
		lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
		if top > 0 {
			var t []gpu.TokenLogProb
			if j-1 < len(sc.top) {
				t = sc.top[j-1]
			}
			lp.TopLogprobs = append(lp.TopLogprobs, topMap(tok, t, top, id, sc.logprobs[j-1]))
		}
	}
}

// tokenize answers vLLM's POST /tokenize: a prompt, or chat messages
// rendered with the chat template, as token ids, with the context the
// server enforces.
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	var req engineapi.TokenizeRequest
	t, ok := s.tokenizerCall(w, r, &req, &req.Model, "a tokenize")
	if !ok {
		return
	}
	var ids []int32
	switch {
	case req.Prompt != nil && req.Messages != nil:
		writeError(w, badRequest("messages", "give prompt or messages, not both"))
		return
	case req.Prompt != nil:
		ids = t.tok.Encode(*req.Prompt)
	case req.Messages != nil:
		if e := checkMessages(req.Messages); e != nil {
			writeError(w, e)
			return
		}
		if t.tok.Chat == nil {
			writeError(w, badRequest("messages", "this model's tokenizer has no chat template (tokenizer_config.json has no chat_template)"))
			return
		}
		gen := req.AddGenerationPrompt == nil || *req.AddGenerationPrompt
		text, err := t.tok.Chat.Render(messages(req.Messages), gen)
		if err != nil {
			writeError(w, badRequest("messages", "%v", err))
			return
		}
		ids = t.tok.Encode(text)
	default:
		writeError(w, badRequest("prompt", "give prompt (a string) or messages"))
		return
	}
	if ids == nil {
		ids = []int32{}
	}
	out := engineapi.TokenizeResponse{Count: len(ids), MaxModelLen: t.pol.MaxSeq(), Tokens: ids}
	if req.ReturnTokenStrs {
		out.TokenStrs = make([]string, len(ids))
		for i, id := range ids {
			_, out.TokenStrs[i] = tokenText(t.tok, id)
		}
	}
	s.writeJSON(w, out, engineapi.Fingerprint(t.pol.Version()))
}

// detokenize answers vLLM's POST /detokenize: token ids as text, special
// tokens included.
func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) {
	var req engineapi.DetokenizeRequest
	t, ok := s.tokenizerCall(w, r, &req, &req.Model, "a detokenize")
	if !ok {
		return
	}
	if req.Tokens == nil {
		writeError(w, badRequest("tokens", "tokens is missing"))
		return
	}
	b, err := t.tok.DecodeBytes(nil, req.Tokens, true)
	if err != nil {
		writeError(w, badRequest("tokens", "%v", err))
		return
	}
	s.writeJSON(w, engineapi.DetokenizeResponse{Prompt: strings.ToValidUTF8(string(b), "\uFFFD")}, engineapi.Fingerprint(t.pol.Version()))
}

// tokenizerCall decodes the body of a tokenizer endpoint into v and
// resolves the model it names (*model, read after decoding) to the base
// policy: adapters share the base's tokenizer, so none is merged, but a
// name claiming an adapter that is not loaded is a 404 as elsewhere.
// These calls need no compute slot.
func (s *Server) tokenizerCall(w http.ResponseWriter, r *http.Request, v any, model *string, what string) (target, bool) {
	if r.Method != http.MethodPost {
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, msg: "use POST"})
		return target{}, false
	}
	if e := s.decode(w, r, v, what); e != nil {
		writeError(w, e)
		return target{}, false
	}
	s.mu.Lock()
	base := s.pol
	_, loaded := s.lookup(*model)
	s.mu.Unlock()
	if _, isAdapter := engineapi.ParseAdapter((*model)[strings.LastIndexByte(*model, ':')+1:]); isAdapter && !loaded {
		writeError(w, &apiError{status: http.StatusNotFound, param: "model",
			msg: fmt.Sprintf("The model `%s` does not exist: no adapter of that name is loaded.", *model)})
		return target{}, false
	}
	return target{pol: base, tok: base.Tokenizer(), name: *model, fixed: -1}, true
}

// checkMessages refuses a role the chat template does not take.
func checkMessages(ms []engineapi.Message) *apiError {
	if len(ms) == 0 {
		return badRequest("messages", "messages is empty")
	}
	for i, m := range ms {
		switch m.Role {
		case "system", "user", "assistant":
		default:
			return badRequest("messages", "messages[%d].role %q: want system, user or assistant", i, m.Role)
		}
	}
	return nil
}
