// Package hf reads and writes the Hugging Face model directory layout used
// by transformers and vLLM: config.json, model.safetensors (or shards named
// model-0000i-of-0000n.safetensors with model.safetensors.index.json), for
// the Llama-style decoder family (model_type llama, mistral, qwen2).
//
// # Behavior
//
// Tensors are float32 in memory and F32, F16 or BF16 on disk; narrowing
// rounds to nearest, ties to even. A safetensors header is validated
// against its file before any tensor is read (known dtype, shape matching
// the byte range, byte ranges tiling the data section with no hole, overlap
// or trailing bytes), and errors name the file and the tensor. Tensors are
// read in bounded chunks with ReadAt, so loading never holds a second copy
// of a file. config.json decodes into arch.Config and is checked against
// its bounds (arch.Config.ValidateShape) before anything it sizes is
// allocated; Open then checks every tensor name and shape in the headers
// against the architecture's tensor list, reporting all mismatches at once,
// before any data is read, and Dir.ReadInto reads the tensors straight into
// their destination (a model's arena).
//
// Every file is written to a temporary name, synced and renamed, so a
// reader never sees a partial file; config.json gets the keys transformers
// and vLLM need (architectures, model_type, torch_dtype).
//
// The tokenizer files (tokenizer.json, tokenizer_config.json) belong to
// package swerl/gpu/tokenizer.
package hf
