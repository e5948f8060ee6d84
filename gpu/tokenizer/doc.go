// Package tokenizer is a byte-level BPE tokenizer compatible with Hugging
// Face tokenizer.json files of the GPT-2, Qwen2/Qwen3 and Llama 3 families,
// plus the chat templates of those families rendered natively.
//
// # Behavior
//
// Encoding runs, in order: added tokens matched literally (longest first,
// special tokens included), Unicode normalization of the text between them
// (NFC when tokenizer.json says so), pre-tokenization with the family's
// split expression (a hand-written scanner with the same matches as the
// regular expression, look-ahead included), the byte-level mapping, and BPE
// merges by rank. Decoding concatenates the bytes of the tokens.
//
// Anything in tokenizer.json that would change the result and is not
// implemented (another model type, dropout, byte fallback, an unknown split
// expression or normalizer, add_prefix_space) is an error at load time,
// never a silent approximation.
//
// # Determinism
//
// Encode is a pure function of the vocabulary and the text; the pre-token
// cache only saves work. A Tokenizer is safe for concurrent use.
//
// # Conformance
//
// The tests reproduce the reference token ids in
// internal/testenv/testdata/conformance/tokenizer with the real Qwen and
// GPT-2 vocabularies installed by scripts/install-test-deps.sh.
package tokenizer
