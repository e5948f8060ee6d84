#!/usr/bin/env bash
# Installs TRL (GRPOTrainer) with transformers, PEFT and torch on CPU into a
# virtual environment cached outside the repository, keyed by the pinned
# versions of bench/peers/trl-peers.txt, for bench/peers/grpo.sh: the trainer
# a user would pick instead of swerl, run on the same job.
# Idempotent: a second run with the same pins does nothing.
#
#   SWERL_CACHE   cache folder (default ~/.cache/swerl)
#
# Prints the environment's folder on its last line (also $SWERL_CACHE/trl).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
pins=(torch==2.15.0) # installed --no-deps: its dependencies are the CUDA libraries
# shellcheck source=scripts/venv-lib.sh
. "$root/scripts/venv-lib.sh"
venv_open install-trl trl "$root/bench/peers/trl-peers.txt" "${pins[@]}"
pip=("$venv/bin/python" -m pip install --no-input --progress-bar off -q --no-deps)
"${pip[@]}" "${pins[@]}"
"${pip[@]}" -r "$req"
"$venv/bin/python" -c 'import torch, transformers, peft, trl, datasets; print("install-trl: torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__, "trl", trl.__version__)'
venv_done trl
