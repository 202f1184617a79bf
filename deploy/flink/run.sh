#!/usr/bin/env bash
# Convert on a Flink cluster: Beam's FlinkRunner packs the pipeline and its staged artifacts into
# Beam's Flink job-server jar (fetched from Maven Central on first use, then cached) and submits it
# to the JobManager's REST API (--flink_submit_uber_jar), then waits for the job to finish. The
# TaskManagers run the Python stages in the Beam worker pool beside them (--environment_type=EXTERNAL).
# No Java is needed here, and no directory is shared with the cluster: a job server started on this
# machine would leave the artifacts in its local --artifacts-dir, where the TaskManagers cannot read them.
#
#   FLINK_MASTER=localhost:8081 ./run.sh 'gs://archive/scenes/**/*.tif' gs://cubes/run1
#
# --flink_version is the cluster's Flink, the flink:1.19 image of docker-compose.yml and kubernetes.yaml
# (change them together): Beam defaults to its newest Flink, and picks the job-server jar by this version
# whenever it starts a job server itself (without --flink_submit_uber_jar; the uber jar asks the
# JobManager). Outputs go to a bucket: TaskManagers share no disk.
set -euo pipefail
inputs=$1
out=$2
shift 2
exec rumi convert "$inputs" --out "$out" \
    --runner FlinkRunner \
    --flink_master="${FLINK_MASTER:-localhost:8081}" \
    --flink_version=1.19 \
    --flink_submit_uber_jar \
    --environment_type=EXTERNAL \
    --environment_config="${WORKER_POOL:-localhost:50000}" \
    --parallelism="${PARALLELISM:-2}" \
    --no-progress "$@"
