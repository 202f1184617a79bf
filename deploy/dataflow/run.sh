#!/usr/bin/env bash
# Build the Flex Template and launch one conversion on Dataflow, bucket to bucket.
#   PROJECT=my-project REGION=europe-west4 BUCKET=gs://my-bucket SA=rumi-convert@my-project.iam.gserviceaccount.com \
#     ./run.sh 'gs://archive/scenes/**/*.tif' gs://cubes/run1
set -euo pipefail
: "${PROJECT:?}" "${REGION:?}" "${BUCKET:?}" "${SA:?}"
image="${REGION}-docker.pkg.dev/${PROJECT}/rumi/rumi-convert:latest"
root=$(cd "$(dirname "$0")/../.." && pwd)
gcloud builds submit "$root" --project "$PROJECT" --config /dev/stdin <<YAML
steps:
- name: gcr.io/cloud-builders/docker
  args: [build, -t, "$image", --build-arg, "WORKER_IMAGE=$image", -f, deploy/dataflow/Dockerfile, .]
images: ["$image"]
YAML
gcloud dataflow flex-template build "$BUCKET/templates/rumi-convert.json" \
    --image "$image" --sdk-language PYTHON --metadata-file "$root/deploy/dataflow/metadata.json"
# Returns once Dataflow has accepted the job (the launcher submits with --detach).
gcloud dataflow flex-template run "rumi-convert-$(date +%Y%m%d-%H%M%S)" \
    --project "$PROJECT" --region "$REGION" --service-account-email "$SA" \
    --template-file-gcs-location "$BUCKET/templates/rumi-convert.json" \
    --temp-location "$BUCKET/tmp" \
    --additional-experiments use_runner_v2 \
    --parameters ^~^inputs="$1"~out="$2"
