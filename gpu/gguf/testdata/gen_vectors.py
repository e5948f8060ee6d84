"""Writes the reference vectors of swerl's GGUF tests with gguf-py
(llama.cpp's own Python package, pinned in scripts/py-peers.txt):

  dequant/<TYPE>.bin   random blocks of that type
  dequant/<TYPE>.f32   gguf-py's dequantization of them, float32 LE
  tiny.gguf            a two-layer Llama written by gguf-py's GGUFWriter
                       (F32, F16, Q8_0, Q4_0 tensors, a byte-level BPE
                       tokenizer with two control tokens, a chat template)
  tiny.q_proj.f32      blk.0.attn_q.weight dequantized and un-permuted
  tiny.k_proj.f32      blk.0.attn_k.weight likewise, both as transformers'
                       GGUF loader does (reverse_permute), float32 LE

Run: $SWERL_PY/bin/python gen_vectors.py (from this folder).
"""
import os
import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize, quantize

rng = np.random.default_rng(20261201)
os.makedirs("dequant", exist_ok=True)

# Byte offsets of the float16 scale fields of each block type.
scales = {
    Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q8_0: [0],
    Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208],
}
for qt, offs in scales.items():
    bsize, tsize = gguf.GGML_QUANT_SIZES[qt]
    blocks = rng.integers(0, 256, size=(8, tsize), dtype=np.uint8)
    for o in offs:
        d = (rng.standard_normal(8) * 0.05).astype(np.float16)
        blocks[:, o:o + 2] = d.view(np.uint8).reshape(8, 2)
    out = dequantize(blocks.reshape(-1), qt).astype(np.float32)
    assert out.size == 8 * bsize, (qt, out.size)
    blocks.tofile(f"dequant/{qt.name}.bin")
    out.tofile(f"dequant/{qt.name}.f32")
for name, dt in (("F16", np.float16),):
    x = (rng.standard_normal(64)).astype(dt)
    x.view(np.uint8).tofile(f"dequant/{name}.bin")
    x.astype(np.float32).tofile(f"dequant/{name}.f32")
x = rng.standard_normal(64).astype(np.float32)
bf = (x.view(np.uint32) >> 16).astype(np.uint16)
bf.tofile("dequant/BF16.bin")
(bf.astype(np.uint32) << 16).view(np.float32).tofile("dequant/BF16.f32")

# A tiny Llama: hidden 32, 2 layers, 4 heads over 2 KV heads, vocab 260.
C, I, L, NH, NKV, V = 32, 64, 2, 4, 2, 260
HS = C // NH
w = gguf.GGUFWriter("tiny.gguf", "llama")
w.add_name("tiny test llama")
w.add_context_length(128)
w.add_embedding_length(C)
w.add_feed_forward_length(I)
w.add_block_count(L)
w.add_head_count(NH)
w.add_head_count_kv(NKV)
w.add_rope_freq_base(10000.0)
w.add_layer_norm_rms_eps(1e-5)
w.add_rope_dimension_count(HS)
w.add_vocab_size(V)
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b)
        cs.append(256 + n)
        n += 1
byte_tok = {b: chr(c) for b, c in zip(bs, cs)}
tokens = ["<|im_start|>", "<|im_end|>"] + [byte_tok[b] for b in range(256)] + ["he", "hel"]
types = [3, 3] + [1] * 256 + [1, 1]
w.add_tokenizer_model("gpt2")
w.add_tokenizer_pre("gpt-2")
w.add_token_list(tokens)
w.add_token_types(types)
w.add_token_merges(["h e", "he l"])
w.add_bos_token_id(0)
w.add_eos_token_id(1)
w.add_chat_template("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def t(name, shape, qt):
    data = (rng.standard_normal(shape) * 0.1).astype(np.float32)
    if qt == Q.F32:
        w.add_tensor(name, data)
        return data
    if qt == Q.F16:
        w.add_tensor(name, data.astype(np.float16))
        return data.astype(np.float16).astype(np.float32)
    q = quantize(data, qt)
    w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qt)
    return dequantize(q, qt).reshape(shape).astype(np.float32)


def reverse_permute(x, n_head):
    # transformers' integrations/ggml.py: undoes convert_hf_to_gguf.py's permute.
    dim1 = x.shape[0]
    return x.reshape(n_head, dim1 // n_head // 2, 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)


t("token_embd.weight", (V, C), Q.Q8_0)
for l in range(L):
    p = f"blk.{l}."
    w_norm = t(p + "attn_norm.weight", (C,), Q.F32)
    q = t(p + "attn_q.weight", (NH * HS, C), Q.Q8_0)
    k = t(p + "attn_k.weight", (NKV * HS, C), Q.Q4_0)
    if l == 0:
        reverse_permute(q, NH).astype(np.float32).tofile("tiny.q_proj.f32")
        reverse_permute(k, NKV).astype(np.float32).tofile("tiny.k_proj.f32")
    t(p + "attn_v.weight", (NKV * HS, C), Q.F16)
    t(p + "attn_output.weight", (C, NH * HS), Q.Q8_0)
    t(p + "ffn_norm.weight", (C,), Q.F32)
    t(p + "ffn_gate.weight", (I, C), Q.Q4_0)
    t(p + "ffn_up.weight", (I, C), Q.Q4_0)
    t(p + "ffn_down.weight", (C, I), Q.Q8_0)
t("output_norm.weight", (C,), Q.F32)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
