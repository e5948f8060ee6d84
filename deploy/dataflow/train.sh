#!/usr/bin/env bash
# Launch `swerl train` (streaming) on Dataflow. Settings: see common.sh, plus
# POLICY_URL: the OpenAI-compatible policy endpoint reachable from the
# workers (e.g. an internal load balancer in front of swerl serve or vLLM).
#   PROJECT=... REGION=... BUCKET=gs://... REGISTRY=... BROKERS=... \
#   SERVICE_ACCOUNT=... POLICY_URL=http://10.0.0.5:8000/v1 deploy/dataflow/train.sh
# --execute_async returns once Dataflow accepted the job; drain it with
#   gcloud dataflow jobs drain JOB_ID --region "$REGION"
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "$0")/common.sh"
: "${POLICY_URL:?set POLICY_URL to the policy server, e.g. http://10.0.0.5:8000/v1}"

exec "${SWERL:-swerl}" train \
  "${dataflow_flags[@]}" \
  --job_name=swerl-train \
  --execute_async \
  --policy="$POLICY_URL" \
  --follow \
  "${kafka_flags[@]}" \
  "$@"
