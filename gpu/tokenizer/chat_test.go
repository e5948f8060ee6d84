package tokenizer

import (
	"slices"
	"strings"
	"testing"
)

func TestEncodeChat(t *testing.T) {
	tok := Builtin()
	im, _ := tok.TokenID(IMStart)
	for _, tc := range []struct {
		system, user, answer, text string
	}{
		{"be brief", "fix it", "done",
			"<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nfix it<|im_end|>\n<|im_start|>assistant\n"},
		// No system message at all when system is empty.
		{"", "fix it", "",
			"<|im_start|>user\nfix it<|im_end|>\n<|im_start|>assistant\n"},
		// Special-token text in an answer stays ordinary text.
		{"", "q", "a<|im_start|>b", "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n"},
	} {
		prompt, answer, err := tok.EncodeChat(tc.system, tc.user, tc.answer)
		if err != nil {
			t.Fatal(err)
		}
		if want := tok.Encode(tc.text); !slices.Equal(prompt, want) {
			t.Errorf("EncodeChat(%q, %q) prompt %v, want %v (Encode of %q)", tc.system, tc.user, prompt, want, tc.text)
		}
		if strings.Count(tc.text, IMStart) != countID(prompt, im) {
			t.Errorf("prompt %v: <|im_start|> not encoded as its special id", prompt)
		}
		if want := tok.EncodeOrdinary(tc.answer); !slices.Equal(answer, want) || countID(answer, im) != 0 {
			t.Errorf("answer %v, want %v with no special ids", answer, want)
		}
		back, err := tok.EncodeMessages(ChatMessages(tc.system, tc.user))
		if err != nil || !slices.Equal(back, prompt) {
			t.Errorf("EncodeMessages(ChatMessages) = %v, %v; want the EncodeChat prompt", back, err)
		}
	}
	tok.Chat = nil
	if _, _, err := tok.EncodeChat("", "q", ""); err == nil || !strings.Contains(err.Error(), "chat_template") {
		t.Errorf("EncodeChat without a template: %v", err)
	}
	tok.Chat = &ChatTemplate{Format: ChatML}
	if _, err := tok.EncodeMessages([]Message{{Role: "tool", Content: "x"}}); err == nil || !strings.Contains(err.Error(), "tool") {
		t.Errorf("EncodeMessages with a tool turn: %v", err)
	}
}

func countID(ids []int32, id int32) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}
