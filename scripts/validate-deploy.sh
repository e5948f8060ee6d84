#!/usr/bin/env bash
# Validates every file in deploy/ with real parsers and linters:
#   yamllint (all YAML), docker-compose config (compose schema and references),
#   promtool check config / check rules / test rules (Prometheus), promtool
#   check rules on the dashboard's PromQL, Kubernetes JSON schemas
#   (kubernetes-models), the dockerfile-utils Dockerfile linter, shellcheck,
#   and go test ./deploy.
#
# Installs what it needs, skipping what is already there, so it is
# idempotent: Debian packages yamllint, docker-compose, prometheus (for
# promtool) and the ShellCheck package; npm packages from
# deploy/validate/package-lock.json into .tools/. Needs root or sudo for apt-get.
# Exits non-zero on the first failing check.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
tools="$root/.tools/deploy-validate"

step() { printf '\n== %s\n' "$*"; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

step "install: Debian packages"
need=()
command -v yamllint >/dev/null || need+=(yamllint)
command -v docker-compose >/dev/null || need+=(docker-compose)
command -v promtool >/dev/null || need+=(prometheus)
command -v shellcheck >/dev/null || need+=(shellcheck)
command -v node >/dev/null || need+=(nodejs npm)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}"
  as_root apt-get update -qq
  # One retry: on a fresh machine an install has failed once with dpkg
  # exiting 2 and no message, then gone through when run again.
  log=$(mktemp)
  if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >"$log" 2>&1; then
    cat "$log"
    echo "apt-get install failed; dpkg --configure -a, then once more"
    as_root dpkg --configure -a || true
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
  rm -f "$log"
else
  echo "already installed: yamllint docker-compose promtool shellcheck node"
fi

step "install: npm packages (deploy/validate/package-lock.json -> .tools/deploy-validate)"
mkdir -p "$tools"
if ! cmp -s deploy/validate/package-lock.json "$tools/package-lock.json" || [ ! -d "$tools/node_modules" ]; then
  cp deploy/validate/package.json deploy/validate/package-lock.json "$tools/"
  (cd "$tools" && npm ci --no-audit --no-fund --loglevel=error)
else
  echo "up to date"
fi

step "yamllint --strict (deploy/.yamllint)"
yamllint --version
yamllint --strict -c deploy/.yamllint deploy/
echo "ok: $(find deploy -name '*.yaml' -o -name '*.yml' | grep -vc node_modules) YAML files"

step "docker-compose config (compose schema, references, interpolation)"
docker-compose version --short
(cd deploy/compose && docker-compose -f compose.yaml --profile jobs config -q)
echo "ok: deploy/compose/compose.yaml"

step "promtool: Prometheus config, rules and rule unit tests"
promtool --version | head -1
promtool check config deploy/prometheus/prometheus.yml
promtool check rules deploy/prometheus/rules.yml
promtool test rules deploy/prometheus/rules_test.yml

step "node: Kubernetes schemas, Dockerfile lint, dashboard expressions"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
node --check deploy/validate/validate.mjs
node deploy/validate/validate.mjs "$tools" deploy "$tmp/dashboard-rules.yml"

step "promtool: the dashboard's PromQL"
promtool check rules "$tmp/dashboard-rules.yml"

step "shellcheck"
shellcheck --version | sed -n 2p
shellcheck -x deploy/dataflow/*.sh scripts/validate-deploy.sh scripts/kafka.sh
echo "ok: deploy/dataflow/*.sh scripts/validate-deploy.sh scripts/kafka.sh"

step "go test ./deploy"
# The cold build of ./cmd/swerl inside it shares 2 cores with the
# background installs of .ci/run: more than go test's 10-minute default.
go test -timeout 30m ./deploy

echo
echo "validate-deploy: all checks passed"
