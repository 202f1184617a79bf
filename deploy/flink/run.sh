#!/usr/bin/env bash
# Convert on a Flink cluster through Beam's portable runner.
#
#   FLINK_JOB_SERVER=localhost:8099 ./run.sh 'scenes/**/*.tif' /mnt/shared/cubes
#
# Start the job server next to Flink first, e.g.
#   docker run --net=host apache/beam_flink1.18_job_server:2.77.0 --flink-master=FLINK_MASTER:8081
# and, on every Flink task manager, a Python worker pool from the same environment as this
# project (the pool starts `python` from PATH, so activate the venv first):
#   python -m apache_beam.runners.worker.worker_pool_main --service_port=50000
set -euo pipefail
inputs=$1
out=$2
shift 2
exec rumi convert "$inputs" --out "$out" \
    --runner=PortableRunner \
    --job_endpoint="${FLINK_JOB_SERVER:-localhost:8099}" \
    --environment_type=EXTERNAL \
    --environment_config="${WORKER_POOL:-localhost:50000}" \
    --no-progress "$@"
