// Package weightsync keeps the inference engines that serve the rollouts
// (vLLM, SGLang, swerl serve) on the weight versions the learner
// publishes, and knows which version each engine holds:
//
//   - ParseSpec parses an HTTP policy spec (the engines and their options,
//     docs/engines.md's table), for the rollout client and the sync alike.
//   - Table records, per engine, the version it holds (what a push
//     loaded, or what it lists), what a learner announced it holds, and
//     the announced adapter it answered 404 to; Table.Named is what a
//     rollout request to it names.
//   - Syncer pushes a version to every engine (Push); Round is the push
//     a run waits for before the round that samples the version (swerl
//     run), Async the background push of a learner that never waits.
//   - Publisher is a separate learner's side (swerl learn): it announces
//     each version on the weights topic and pushes it, then announces it
//     again naming the engines that loaded it, which rollout workers in
//     other processes follow (pipelines/train.FollowWeights fills their
//     Table).
//
// # What is pushed
//
// A version folder that holds a PEFT adapter (adapter_config.json, at its
// root or in adapter/) is loaded as a LoRA adapter named
// engineapi.AdapterName(version), "swerl-v000123":
//
//   - vLLM: POST /v1/load_lora_adapter {"lora_name", "lora_path"} (the
//     server runs with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True);
//     answers 200 with a text body, or an error object
//     ({"object":"error","message",…} or {"error":{"message",…}}).
//   - SGLang: POST /load_lora_adapter {"lora_name", "lora_path"} (the
//     server runs with --enable-lora and a --max-lora-rank that fits);
//     answers {"success", "error_message", "loaded_adapters"}.
//
// Adapters older than the newest Keep (default 2) are unloaded (POST
// /v1/unload_lora_adapter or /unload_lora_adapter {"lora_name"}), so an
// engine's adapter slots do not fill up; one still in use by a request in
// flight is the engine's business (both finish it). The window starts with
// the swerl-vNNNNNN adapters the engine lists in GET /v1/models before the
// first push (vLLM and swerl serve list them), so those an earlier process
// of the run loaded are unloaded in turn too.
//
// A version folder with full weights (config.json, no adapter) is loaded by
// SGLang with POST /update_weights_from_disk {"model_path",
// "weight_version"} ({"success", "message"} back). vLLM loads them in
// place through its workers' reload_weights: POST /collective_rpc
// {"method": "reload_weights", "kwargs": {"weights_path"}}, an endpoint it
// serves only with VLLM_SERVER_DEV_MODE=1. A vLLM that answers 404 there
// keeps the weights it started with (Push logs it once per engine and does
// not ask it again).
//
// An adapter is a delta on the base it was trained from, so the engine
// must hold that base. A LoRA run started from the engine's own model
// (swerl run --model BASE --sft-steps 0) has it. A LoRA phase on top of a
// full warm start trains on the warm start's last checkpoint: SGLang (and
// swerl serve with engine=sglang) receive that checkpoint through
// update_weights_from_disk before the first adapter, as a full-weight
// version, and vLLM in dev mode through reload_weights; otherwise start
// vLLM on that checkpoint, or train the warm start as LoRA too (swerl run
// --sft-lora), so that every version is an adapter on the base.
//
// # Failures
//
// Every request has a deadline, Timeout (default 60s, swerl's
// --engine-timeout), its answer included, so an engine that accepts a
// connection and never answers fails like one that refuses. Every request
// is retried with exponential backoff and jitter (Attempts, Backoff): an
// engine on a shared volume may not see a new folder at once. The retries
// and their waits end when Push's context does.
// A load refused because the name is taken (a retry after a lost answer, or
// an earlier run's adapter of the same number from another folder) unloads
// that name and loads again; unloading a name the engine does not know
// counts as done. When the retries run out, Push returns an error naming the engine, the version and the
// engine's message, and the engine keeps the newest version it did load:
// the Table (and Held) keep it, so rollouts keep naming that adapter and
// their samples keep its exact version, which the learner's staleness
// bound then judges. Held never waits for a push in flight.
//
// An engine restarted under a run (a crash, a rescheduled pod) comes back
// holding its own weights only. A request to it that finds no server, or
// a 404 for the adapter the sync loaded there, marks it lost in the Table
// (Lose); before the next request to it, Table.Restore has the Syncer load
// again the newest version a Push asked of it (after the full-weight
// version that adapter builds on), so no sample is drawn from, or
// labelled with, a version the engine does not hold. Until the engine
// answers again, those attempts fail and the request's retries go on.
//
// # Pushing in the background
//
// Push returns once every engine answered, which a round that samples the
// version needs (swerl run waits for it, bounded by Timeout and the
// retries). A learner must not wait: Async pushes in one goroutine, Submit
// returns at once, and the newest version submitted is pushed next. A
// version submitted while a push is in flight makes that push late (logged,
// swerl_engine_push_late_total); versions superseded before their turn
// are skipped (swerl_engine_push_skipped_total), never queued. What the
// engines hold and the rollouts name stays exact either way: an engine
// holds a version (in the Table) only once it confirmed loading it.
// swerl_engine_held_version and swerl_engine_push_behind_versions show how
// far the engines trail the learner. Cancelling Async's context (or
// Close) cancels the push in flight; the engines keep what they confirmed.
//
// # Where the engine reads the files
//
// The engine opens lora_path / model_path itself, in its own process and
// often as another user on another machine, so the path must name the
// same folder there:
//
//   - Shared volume: put the run's output root on a volume mounted at the
//     same path in the learner and in every engine (NFS, a Kubernetes
//     ReadWriteMany volume, a host path for engines on one machine). The
//     learner writes files 0644 and folders 0755, so an engine running as
//     another user can read them; Push checks this and refuses a version
//     an engine could not read. When the mount point differs, PathMap
//     rewrites the learner's prefix to the engine's (--engine-path
//     /learner/out=/mnt/out).
//   - Object storage: vLLM resolves a lora_path that is a Hugging Face Hub
//     id, and its LoRA resolver plugins load from other stores; SGLang
//     loads local paths and Hub ids. Sync the version folder to the store
//     (e.g. gsutil rsync / aws s3 sync of checkpoints/v000123) and map the
//     output root to the store's prefix with PathMap; the syncer sends the
//     mapped name as is (it checks only the learner's local folder).
package weightsync
