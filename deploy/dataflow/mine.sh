#!/usr/bin/env bash
# Launch `swerl mine` (batch) on Dataflow. Settings: see common.sh.
#   PROJECT=... REGION=... BUCKET=gs://... REGISTRY=... BROKERS=... \
#   SERVICE_ACCOUNT=... deploy/dataflow/mine.sh [extra swerl mine flags]
# Run it on linux/amd64 (the running binary is staged as the worker) with
# application-default credentials (gcloud auth application-default login).
# swerl mine publishes with plain Kafka settings only (it has no TLS or SASL
# flags): BROKERS must be a plain-text listener.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"

exec "${SWERL:-swerl}" mine \
  "${dataflow_flags[@]}" \
  --job_name="swerl-mine-$(date -u +%Y%m%d-%H%M%S)" \
  --brokers="$BROKERS" \
  "$@"
