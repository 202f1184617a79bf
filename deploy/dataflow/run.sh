#!/usr/bin/env bash
# Build the Flex Template and launch one conversion on Dataflow.
#   PROJECT=my-project REGION=europe-west4 BUCKET=gs://my-bucket ./run.sh 'gs://scenes/**/*.tif' /mnt/cubes
set -euo pipefail
: "${PROJECT:?}" "${REGION:?}" "${BUCKET:?}"
image="${REGION}-docker.pkg.dev/${PROJECT}/rumi/rumi-convert:latest"
root=$(cd "$(dirname "$0")/../.." && pwd)
gcloud builds submit "$root" --project "$PROJECT" --tag "$image" --config /dev/stdin <<YAML
steps:
- name: gcr.io/cloud-builders/docker
  args: [build, -t, "$image", -f, deploy/dataflow/Dockerfile, .]
images: ["$image"]
YAML
gcloud dataflow flex-template build "$BUCKET/templates/rumi-convert.json" \
    --image "$image" --sdk-language PYTHON --metadata-file "$root/deploy/dataflow/metadata.json"
gcloud dataflow flex-template run "rumi-convert-$(date +%Y%m%d-%H%M%S)" \
    --project "$PROJECT" --region "$REGION" \
    --template-file-gcs-location "$BUCKET/templates/rumi-convert.json" \
    --parameters inputs="$1",out="$2",sdk_container_image="$image"
