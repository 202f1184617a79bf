#!/usr/bin/env bash
# Convert on a Flink cluster: Beam's FlinkRunner submits to the JobManager (it starts the Flink
# job server itself, which needs Java and the job-server jar), and the TaskManagers run the Python
# stages in the Beam worker pool beside them (--environment_type=EXTERNAL).
#
#   FLINK_MASTER=localhost:8081 ./run.sh 'gs://archive/scenes/**/*.tif' gs://cubes/run1
#
# Outputs go to a bucket: TaskManagers share no disk.
set -euo pipefail
inputs=$1
out=$2
shift 2
exec rumi convert "$inputs" --out "$out" --no-catalog \
    --runner FlinkRunner \
    --flink_master="${FLINK_MASTER:-localhost:8081}" \
    --environment_type=EXTERNAL \
    --environment_config="${WORKER_POOL:-localhost:50000}" \
    --parallelism="${PARALLELISM:-2}" \
    --no-progress "$@"
