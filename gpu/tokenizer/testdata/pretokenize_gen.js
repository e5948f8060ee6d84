// pretokenize_gen.js writes pretokenize.golden.json: pseudo-random strings
// split by the JavaScript RegExp engine (the reference) with the GPT-2,
// Qwen2 and Llama 3 pre-tokenizer expressions. JavaScript has no inline
// (?i:…) group, so the contraction alternatives are spelled out with
// character classes, which is equivalent for ASCII input.
//
// Run: node pretokenize_gen.js > pretokenize.golden.json
"use strict";
const contractionsCI = "'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]";
const regexes = {
  gpt2: "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
  qwen2: contractionsCI + "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  llama3: contractionsCI + "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
// Pieces chosen to exercise every alternative and their interactions.
const alphabet = [
  "a", "Z", "hello", "World", "é", "ß", "ü", "Привет", "我想", "日本", "x1",
  "0", "7", "42", "12345", "½", "²", "٣",
  " ", " ", " ", "  ", "\t", "\n", "\r\n", "\r", "\n\n", " \n", "\u00a0", "\u3000", "\u2003", "\v", "\f",
  "'", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'RE", "'Ll", "'x",
  ".", ",", "!", "?", "(", ")", "{", "}", "_", "-", "+=", "==", "//", "#", "@", "$", "\"", "`",
  "🦙", "😁", "～", "\u0301", "\u200d",
];
let seed = 20250601;
function rnd(n) {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed % n;
}
const texts = [];
for (let i = 0; i < 600; i++) {
  const n = 1 + rnd(12);
  let s = "";
  for (let j = 0; j < n; j++) s += alphabet[rnd(alphabet.length)];
  texts.push(s);
}
const out = {};
for (const [name, src] of Object.entries(regexes)) {
  const re = new RegExp(src, "gu");
  out[name] = texts.map((text) => ({ text, pieces: text.match(re) || [] }));
}
process.stdout.write(JSON.stringify(out, null, 1) + "\n");
