package tokenizer

import (
	"fmt"
	"strings"
)

// ChatFormat is a family of chat templates rendered natively.
type ChatFormat int

const (
	// ChatML is the <|im_start|>role\n…<|im_end|>\n format of Qwen.
	ChatML ChatFormat = iota + 1
	// Llama3 is the <|start_header_id|>role<|end_header_id|>\n\n…<|eot_id|>
	// format of Llama 3.
	Llama3
)

func (f ChatFormat) String() string {
	switch f {
	case ChatML:
		return "chatml"
	case Llama3:
		return "llama3"
	}
	return fmt.Sprintf("ChatFormat(%d)", int(f))
}

// ChatTemplate renders conversations the way a Hugging Face Jinja chat
// template does, for the template families it was detected from. Jinja
// cannot run in Go; DetectChatTemplate maps a template text onto these
// fields or fails.
type ChatTemplate struct {
	Format ChatFormat
	// DefaultSystem is the system message ChatML inserts when the
	// conversation has none ("" for none; Qwen2 and Qwen2.5 have one).
	DefaultSystem string
	// Think enables the Qwen3 handling of <think> blocks in assistant
	// turns after the last user query.
	Think bool
	// KnowledgeDate enables the Llama 3.1 system header ("Cutting
	// Knowledge Date", "Today Date"); DateString is its date.
	KnowledgeDate bool
	DateString    string
}

// Message is one turn of a conversation.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatMLTemplate is the Jinja source of a plain ChatML template with no
// default system message: the template of the built-in tokenizer.
const ChatMLTemplate = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// DetectChatTemplate recognises the family of a Jinja chat template from
// its text. It fails, quoting the start of the template, when the family is
// unknown or uses features this package does not render (tools).
func DetectChatTemplate(src string) (*ChatTemplate, error) {
	switch {
	case strings.Contains(src, "<|im_start|>"):
		c := &ChatTemplate{Format: ChatML}
		// A default system message is a literal between the system
		// header and <|im_end|>; other occurrences concatenate content.
		// The header's newline is an escape (\n) in some templates and a
		// real newline in others (SmolLM2's).
	markers:
		for _, marker := range []string{`<|im_start|>system\n`, "<|im_start|>system\n"} {
			for rest := src; ; {
				i := strings.Index(rest, marker)
				if i < 0 {
					break
				}
				rest = rest[i+len(marker):]
				if j := strings.Index(rest, "<|im_end|>"); j > 0 && !strings.ContainsAny(rest[:j], `'"{}+`) {
					c.DefaultSystem = strings.ReplaceAll(rest[:j], `\n`, "\n")
					break markers
				}
			}
		}
		c.Think = strings.Contains(src, "<think>") && strings.Contains(src, "reasoning_content")
		return c, nil
	case strings.Contains(src, "<|start_header_id|>") && strings.Contains(src, "<|eot_id|>"):
		c := &ChatTemplate{Format: Llama3}
		if strings.Contains(src, "Cutting Knowledge Date") {
			c.KnowledgeDate = true
			c.DateString = "26 Jul 2024"
		}
		return c, nil
	}
	head := src
	if len(head) > 60 {
		head = head[:60] + "…"
	}
	return nil, fmt.Errorf("tokenizer: unsupported chat template %q (supported: ChatML, Llama 3)", head)
}

// Render returns the prompt text of msgs; with addGenerationPrompt it ends
// with the header of an assistant turn. Roles must be system, user or
// assistant.
func (c *ChatTemplate) Render(msgs []Message, addGenerationPrompt bool) (string, error) {
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant":
		default:
			return "", fmt.Errorf("tokenizer: chat message %d: unsupported role %q", i, m.Role)
		}
	}
	var b strings.Builder
	switch c.Format {
	case ChatML:
		c.renderChatML(&b, msgs, addGenerationPrompt)
	case Llama3:
		c.renderLlama3(&b, msgs, addGenerationPrompt)
	default:
		return "", fmt.Errorf("tokenizer: unknown chat format %v", c.Format)
	}
	return b.String(), nil
}

func (c *ChatTemplate) renderChatML(b *strings.Builder, msgs []Message, gen bool) {
	if c.DefaultSystem != "" && (len(msgs) == 0 || msgs[0].Role != "system") {
		b.WriteString("<|im_start|>system\n" + c.DefaultSystem + "<|im_end|>\n")
	}
	lastQuery := len(msgs) - 1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			lastQuery = i
			break
		}
	}
	for i, m := range msgs {
		if m.Role != "assistant" || !c.Think {
			b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
			continue
		}
		content, reasoning := m.Content, ""
		if k := strings.Index(content, "</think>"); k >= 0 {
			reasoning = strings.TrimLeft(lastAfter(strings.TrimRight(content[:k], "\n"), "<think>"), "\n")
			content = strings.TrimLeft(content[strings.LastIndex(content, "</think>")+len("</think>"):], "\n")
		}
		if i > lastQuery && (i == len(msgs)-1 || reasoning != "") {
			b.WriteString("<|im_start|>assistant\n<think>\n" + strings.Trim(reasoning, "\n") + "\n</think>\n\n" + strings.TrimLeft(content, "\n"))
		} else {
			b.WriteString("<|im_start|>assistant\n" + content)
		}
		b.WriteString("<|im_end|>\n")
	}
	if gen {
		b.WriteString("<|im_start|>assistant\n")
	}
}

func lastAfter(s, sep string) string {
	if k := strings.LastIndex(s, sep); k >= 0 {
		return s[k+len(sep):]
	}
	return s
}

func (c *ChatTemplate) renderLlama3(b *strings.Builder, msgs []Message, gen bool) {
	b.WriteString("<|begin_of_text|>")
	if c.KnowledgeDate {
		system := ""
		if len(msgs) > 0 && msgs[0].Role == "system" {
			system = strings.TrimSpace(msgs[0].Content)
			msgs = msgs[1:]
		}
		b.WriteString("<|start_header_id|>system<|end_header_id|>\n\n")
		b.WriteString("Cutting Knowledge Date: December 2023\nToday Date: " + c.DateString + "\n\n")
		b.WriteString(system + "<|eot_id|>")
	}
	for _, m := range msgs {
		b.WriteString("<|start_header_id|>" + m.Role + "<|end_header_id|>\n\n" + strings.TrimSpace(m.Content) + "<|eot_id|>")
	}
	if gen {
		b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	}
}

// ChatMessages returns the single-turn conversation of a prompt: a system
// message when system is not empty, then the user message. Rollout
// requests and training samples carry (system, user) pairs; building the
// conversation here keeps the sampler's and the trainer's prompts equal.
func ChatMessages(system, user string) []Message {
	msgs := make([]Message, 0, 2)
	if system != "" {
		msgs = append(msgs, Message{Role: "system", Content: system})
	}
	return append(msgs, Message{Role: "user", Content: user})
}

// EncodeMessages renders msgs with the chat template and a generation
// prompt (the header of the assistant turn) and encodes the text with
// special tokens recognised: the prompt ids a policy continues.
func (t *Tokenizer) EncodeMessages(msgs []Message) ([]int32, error) {
	if t.Chat == nil {
		return nil, fmt.Errorf("tokenizer: no chat template (tokenizer_config.json has no chat_template)")
	}
	text, err := t.Chat.Render(msgs, true)
	if err != nil {
		return nil, err
	}
	return t.Encode(text), nil
}

// EncodeChat returns the ids of the single-turn chat prompt (system, user)
// (EncodeMessages of ChatMessages) and of an answer to it, encoded as
// ordinary text: special-token text inside an answer stays text, as when
// a sampled completion is decoded and encoded again. No end-of-sequence
// token is appended; callers add one when the answer ended with it. The
// sampler, the RL learner and SFT all encode through here, so the
// log-probabilities the sampler records are those the trainer recomputes.
func (t *Tokenizer) EncodeChat(system, user, answer string) (prompt, completion []int32, err error) {
	prompt, err = t.EncodeMessages(ChatMessages(system, user))
	if err != nil {
		return nil, nil, err
	}
	return prompt, t.EncodeOrdinary(answer), nil
}
