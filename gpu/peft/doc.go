// Package peft reads, writes and merges LoRA adapters in the directory
// layout of Hugging Face PEFT, which PEFT, vLLM (load_lora_adapter) and
// SGLang load as is: adapter_config.json and adapter_model.safetensors.
//
// # Layout
//
// adapter_config.json carries peft_type "LORA", task_type "CAUSAL_LM",
// r, lora_alpha, target_modules (module names such as "q_proj"),
// base_model_name_or_path, and the defaults PEFT writes that change what
// an engine does with the file (bias "none", lora_dropout 0,
// fan_in_fan_out false, use_rslora false, use_dora false,
// inference_mode true). adapter_model.safetensors holds, for every layer L
// and target module, the pair
//
//	base_model.model.model.layers.L.self_attn.q_proj.lora_A.weight  [r, in]
//	base_model.model.model.layers.L.self_attn.q_proj.lora_B.weight  [out, r]
//
// (mlp.gate_proj, mlp.up_proj and mlp.down_proj likewise), and the module's
// weight W [out, in] of the base model becomes W + (lora_alpha/r)·B·A.
//
// # Behavior
//
// Read checks the whole adapter before it returns one: the config's type,
// rank and alpha bounds and the features swerl does not implement
// (rslora, DoRA, per-module ranks, layer subsets, modules_to_save), then
// every tensor name and shape, each (layer, module) holding both halves
// for exactly the configured modules; ReadFor also checks the shapes
// against a base architecture. The safetensors header is validated by
// package swerl/gpu/hf before any tensor is read. Errors name the file.
// Write writes files 0644 into a directory made 0755, since inference
// engines often run as another user; each file is written to a temporary
// name and renamed. Merge adds the scaled low-rank product into a model's
// host weights in place.
package peft
