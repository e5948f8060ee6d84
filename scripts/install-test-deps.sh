#!/usr/bin/env bash
# Installs the outside tools swerl's tests compare against, into .tools/ at the
# repository root (git-ignored). Idempotent; safe to run again.
#   npm: DuckDB (an independent Parquet reader)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$root/.tools/npm"
cd "$root/.tools/npm"
[ -f package.json ] || echo '{"name":"swerl-test-tools","private":true}' > package.json
pkgs=(
  "@duckdb/node-api@1.5.6-r.1"
)
echo "install-test-deps: npm ${pkgs[*]}"
npm install --no-audit --no-fund --loglevel=error "${pkgs[@]}"
