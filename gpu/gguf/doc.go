// Package gguf reads GGUF files, the model format of llama.cpp, and
// imports Llama and Qwen2 ones as Hugging Face model directories that
// every swerl command and transformers load.
//
// # Behavior
//
// Open reads the header, the metadata and the tensor table and checks
// them against the file before anything is allocated that the file sizes:
// every count and length must fit in the bytes that remain (a string of
// 2^60 bytes, an array of 2^60 elements or a tensor past the end of the
// file is an error naming the key or tensor), tensor dimensions are
// bounded, data offsets are aligned and tensors do not overlap. Memory
// is therefore bounded by a small multiple of the file's size, and tensor
// data is read with ReadAt only when asked for.
//
// Float32 dequantizes F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
// Q5_K and Q6_K tensors the way ggml does (ggml-quants.c), in float32;
// any other type is an error naming the tensor and the type.
//
// Import maps the llama.* or qwen2.* metadata onto config.json, the
// tensors onto their Hugging Face names (undoing the row permutation
// llama.cpp's converter applies to Llama's q and k projections) and the
// tokenizer.ggml.* keys onto tokenizer.json and tokenizer_config.json.
//
// The reader is written here rather than taken from
// github.com/gpustack/gguf-parser-go: that module pulls in gonum,
// json-iterator and an HTTP client for its remote and memory-estimate
// features, none of which swerl uses, and the part swerl needs (a bounded
// header parse and tensor offsets) is small.
package gguf
