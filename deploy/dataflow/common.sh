#!/usr/bin/env bash
# Shared Dataflow settings for mine.sh and train.sh; sourced, not run.
# Required: PROJECT, REGION, BUCKET (gs://... without a trailing slash),
# REGISTRY (Artifact Registry path holding the swerl-harness image),
# BROKERS (Kafka reachable from the Dataflow VPC), SERVICE_ACCOUNT.
# Optional: SUBNETWORK (regions/R/subnetworks/S), MAX_WORKERS, MACHINE_TYPE,
# KAFKA_USER with KAFKA_PASSWORD (SASL/SCRAM-SHA-512 over TLS, swerl train
# only), KAFKA_CA, DRY_RUN=1 (print the job only).

: "${PROJECT:?set PROJECT to the GCP project id}"
: "${REGION:?set REGION, e.g. us-central1}"
: "${BUCKET:?set BUCKET, e.g. gs://my-swerl-bucket}"
: "${REGISTRY:?set REGISTRY, e.g. us-central1-docker.pkg.dev/PROJECT/swerl}"
: "${BROKERS:?set BROKERS to the Kafka bootstrap servers, host:port,...}"
: "${SERVICE_ACCOUNT:?set SERVICE_ACCOUNT to the worker service account email}"

BEAM_VERSION=2.77.0

# Beam flags, named as in the Beam Go SDK v2.77.0 (runners/dataflow,
# options/gcpopts, options/jobopts).
dataflow_flags=(
  --runner=dataflow
  --project="$PROJECT"
  --region="$REGION"
  --temp_location="$BUCKET/tmp"
  --staging_location="$BUCKET/staging"
  --sdk_container_image="$REGISTRY/swerl-harness:$BEAM_VERSION"
  --service_account_email="$SERVICE_ACCOUNT"
  --max_num_workers="${MAX_WORKERS:-20}"
  --worker_machine_type="${MACHINE_TYPE:-n2-standard-8}"
  --experiments=use_runner_v2
)
if [[ -n "${SUBNETWORK:-}" ]]; then
  dataflow_flags+=(--subnetwork="$SUBNETWORK" --no_use_public_ips)
fi
if [[ "${DRY_RUN:-0}" == 1 ]]; then
  dataflow_flags+=(--dry_run)
fi

# swerl's Kafka flags (swerl train). SASL/TLS only when a user is given:
# the password is read from the environment variable KAFKA_PASSWORD
# (--sasl-password-env) by the submitter and travels to the workers in the
# pipeline's Kafka config; the CA file must exist at the same path on the
# workers too (bake it into the harness image), since the Kafka IO runs there.
kafka_flags=(--brokers="$BROKERS")
if [[ -n "${KAFKA_USER:-}" ]]; then
  : "${KAFKA_PASSWORD:?set KAFKA_PASSWORD to the SASL password of KAFKA_USER}"
  export KAFKA_PASSWORD
  kafka_flags+=(
    --sasl-mechanism=scram-sha-512
    --sasl-user="$KAFKA_USER"
    --sasl-password-env=KAFKA_PASSWORD
    --kafka-tls
  )
  if [[ -n "${KAFKA_CA:-}" ]]; then
    kafka_flags+=(--kafka-ca="$KAFKA_CA")
  fi
fi
