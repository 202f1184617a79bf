"""Airflow DAGs: nightly Sentinel-2 L2A ingestion with ``rumi convert --stac-api``.

Two DAGs, one per runner, built by :func:`nightly_dag` with the same task graph::

    convert  >>  list_new_cubes

* ``rumi_sentinel2_dataflow``: ``convert`` is a ``DataflowStartFlexTemplateOperator``
  launching the Flex Template of ``deploy/dataflow`` (image and metadata there).
* ``rumi_sentinel2_flink``: ``convert`` is a ``BashOperator`` running
  ``rumi convert ... --runner FlinkRunner`` against the JobManager of
  ``deploy/flink``, the command of ``deploy/flink/run.sh``: the pipeline goes to
  the cluster's REST API as one jar (``--flink_submit_uber_jar``), its Python
  stages run in the worker pool beside each TaskManager, and the task ends when
  the job does (no ``--detach``), failing when it fails.
* ``list_new_cubes`` (both): ``rumi search`` over the catalogue for cubes whose
  acquisitions fall in the run's data interval, so the log says what the night added.

The ``rumi`` commands (``list_new_cubes``, and ``convert`` on Flink) run on the
Airflow worker, which needs rumi-forge installed (``rumi`` on its ``PATH``) but
no Java.

Each run searches from ``start`` to an open end: the catalogue is the state,
so only acquisitions newer than what it holds are converted, the open month's
cube is rewritten in place, other months are left alone, and a night with
nothing new converts and writes nothing. ``max_active_runs=1`` keeps two
nights from writing one catalogue at once; ``catchup=False`` because one run
catches up on everything anyway.

Every setting is an environment-backed Airflow Variable,
``AIRFLOW_VAR_RUMI_S2_<KEY>``, with the defaults of :data:`SETTINGS`. They are
read from the environment when the DAG is parsed, never from the metadata
database (which a top-level ``Variable.get`` would query on every parse).
"""

from __future__ import annotations

import datetime as dt
import os
import shlex
from typing import TYPE_CHECKING

from airflow.providers.google.cloud.operators.dataflow import DataflowStartFlexTemplateOperator

try:  # Airflow 3
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.sdk import DAG
except ImportError:  # Airflow 2
    from airflow import DAG
    from airflow.operators.bash import BashOperator

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow.sdk import BaseOperator

SETTINGS = {
    "stac_api": "https://earth-search.aws.element84.com/v1",
    "collection": "sentinel-2-l2a",
    "bbox": "13.0,52.3,13.8,52.7",
    "start": "2024-01-01",
    "mgrs": "33UUU,33UVU",
    "max_cloud": "60",
    "bands": "",
    "out": "gs://BUCKET/sentinel2",
    "project": "PROJECT",
    "region": "REGION",
    "template": "gs://BUCKET/templates/rumi-convert.json",
    "flink_master": "localhost:8081",
    "flink_version": "1.19",
    "flink_job_server_jar": "",
    "worker_pool": "localhost:50000",
    "parallelism": "2",
    "schedule": "0 3 * * *",
}
"""Defaults of the ``AIRFLOW_VAR_RUMI_S2_<KEY>`` variables.

``PROJECT``, ``REGION`` and ``BUCKET`` are placeholders to set (workers share no
disk, neither on Dataflow nor on Flink: ``out`` is a bucket). ``flink_version`` is the
Flink of the ``flink:`` image in ``deploy/flink``; ``worker_pool`` is where each
TaskManager reaches the Beam worker pool beside it; ``flink_job_server_jar``, a
path or URL of Beam's Flink job-server jar, when the worker cannot fetch it from
Maven Central.
"""

TASKS = {"convert": [], "list_new_cubes": ["convert"]}
"""The task graph of both DAGs: each task with its upstream tasks."""


def setting(key: str) -> str:
    """The variable ``AIRFLOW_VAR_RUMI_S2_<KEY>``, or its default."""
    return os.environ.get(f"AIRFLOW_VAR_RUMI_S2_{key.upper()}", SETTINGS[key])


def convert_options() -> dict[str, str]:
    """The ``rumi convert`` options of a nightly run, by Flex Template parameter name.

    The names are those of ``deploy/dataflow/metadata.json``: the option with
    ``_`` for ``-`` (``stac_api`` is ``--stac-api``), as the template's
    launcher maps them back.
    """
    options = {
        "stac_api": setting("stac_api"),
        "collection": setting("collection"),
        "bbox": setting("bbox"),
        "datetime": f"{setting('start')}/..",
        "mgrs": setting("mgrs"),
        "max_cloud": setting("max_cloud"),
        "cube_period": "P1M",
        "bands": setting("bands"),
        "out": setting("out"),
    }
    return {k: v for k, v in options.items() if v}


def flink_command() -> str:
    """The ``rumi convert`` command of the Flink DAG: ``deploy/flink/run.sh``'s, with :func:`convert_options`."""
    options = [f"--{name.replace('_', '-')}={value}" for name, value in convert_options().items()]
    beam = [
        f"--flink_master={setting('flink_master')}",
        f"--flink_version={setting('flink_version')}",
        "--flink_submit_uber_jar",
        "--environment_type=EXTERNAL",
        f"--environment_config={setting('worker_pool')}",
        f"--parallelism={setting('parallelism')}",
    ]
    if setting("flink_job_server_jar"):
        beam.append(f"--flink_job_server_jar={setting('flink_job_server_jar')}")
    return shlex.join(["rumi", "convert", *options, "--runner", "FlinkRunner", *beam, "--no-progress"])


def _list_new_cubes() -> BashOperator:
    catalogue = shlex.quote(f"{setting('out')}/stac")
    return BashOperator(
        task_id="list_new_cubes",
        bash_command=f"rumi search {catalogue} --datetime '{{{{ data_interval_start | ds }}}}/..'",
    )


DEFAULTS = {"owner": "rumi", "retries": 1, "retry_delay": dt.timedelta(minutes=30)}


def nightly_dag(runner: str, convert: Callable[[], BaseOperator]) -> DAG:
    """One nightly DAG of the documented task graph, :data:`TASKS`, on ``runner``.

    Args:
        runner: The runner's name: ``dag_id`` is ``rumi_sentinel2_<runner>``.
        convert: Builds the runner's ``convert`` task; called inside the DAG's
            context so the operator joins it.

    Returns:
        The DAG, ``convert >> list_new_cubes``, with the schedule and the
        one-run-at-a-time settings both runners share.
    """
    with DAG(
        dag_id=f"rumi_sentinel2_{runner.lower()}",
        description=f"Nightly Sentinel-2 L2A cubes on {runner} (rumi convert --stac-api, incremental)",
        schedule=setting("schedule"),
        start_date=dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULTS,
        tags=["rumi", "sentinel-2"],
    ) as dag:
        convert() >> _list_new_cubes()
    return dag


def _dataflow_convert() -> BaseOperator:
    return DataflowStartFlexTemplateOperator(
        task_id="convert",
        project_id=setting("project"),
        location=setting("region"),
        body={
            "launchParameter": {
                "jobName": "rumi-s2-{{ ds_nodash }}",
                "containerSpecGcsPath": setting("template"),
                "parameters": convert_options(),
            }
        },
        wait_until_finished=True,
    )


def _flink_convert() -> BaseOperator:
    return BashOperator(task_id="convert", bash_command=flink_command())


dataflow_dag = nightly_dag("Dataflow", _dataflow_convert)
flink_dag = nightly_dag("Flink", _flink_convert)
