"""Airflow DAGs: nightly Sentinel-2 L2A ingestion with ``rumi convert --stac-api``.

Two DAGs, one per runner, built by :func:`nightly_dag` with the same task graph::

    convert  >>  list_new_cubes

* ``rumi_sentinel2_dataflow``: ``convert`` is a ``DataflowStartFlexTemplateOperator``
  launching the Flex Template of ``deploy/dataflow`` (image and metadata there).
* ``rumi_sentinel2_flink``: ``convert`` is a ``BeamRunPythonPipelineOperator``
  running ``pipelines.convert`` on the ``PortableRunner`` against a Flink job
  server (see ``deploy/flink/run.sh``).
* ``list_new_cubes`` (both): ``rumi search`` over the catalogue for cubes whose
  acquisitions fall in the run's data interval, so the log says what the night added.

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
from typing import TYPE_CHECKING

from airflow.providers.apache.beam.operators.beam import BeamRunPythonPipelineOperator
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
    "out": "/mnt/rumi/sentinel2",
    "project": "my-project",
    "region": "europe-west1",
    "template": "gs://my-bucket/templates/rumi-convert.json",
    "flink_job_server": "localhost:8099",
    "worker_pool": "localhost:50000",
    "entry_point": "/opt/rumi/deploy/dataflow/main.py",
    "schedule": "0 3 * * *",
}
"""Defaults of the ``AIRFLOW_VAR_RUMI_S2_<KEY>`` variables."""

TASKS = {"convert": [], "list_new_cubes": ["convert"]}
"""The task graph of both DAGs: each task with its upstream tasks."""


def setting(key: str) -> str:
    """The variable ``AIRFLOW_VAR_RUMI_S2_<KEY>``, or its default."""
    return os.environ.get(f"AIRFLOW_VAR_RUMI_S2_{key.upper()}", SETTINGS[key])


def convert_options() -> dict[str, str]:
    """The ``rumi convert`` options of a nightly run (without ``--out``), by name."""
    options = {
        "stac-api": setting("stac_api"),
        "collection": setting("collection"),
        "bbox": setting("bbox"),
        "datetime": f"{setting('start')}/..",
        "mgrs": setting("mgrs"),
        "max-cloud": setting("max_cloud"),
        "cube-period": "P1M",
    }
    if setting("bands"):
        options["bands"] = setting("bands")
    return {k: v for k, v in options.items() if v}


def _list_new_cubes() -> BashOperator:
    catalogue = f"{setting('out')}/stac"
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
                "parameters": {**convert_options(), "out": setting("out")},
            }
        },
        wait_until_finished=True,
    )


def _flink_convert() -> BaseOperator:
    return BeamRunPythonPipelineOperator(
        task_id="convert",
        py_file=setting("entry_point"),
        runner="PortableRunner",
        pipeline_options={
            **convert_options(),
            "out": setting("out"),
            "job_endpoint": setting("flink_job_server"),
            "environment_type": "EXTERNAL",
            "environment_config": setting("worker_pool"),
            "no-progress": True,
        },
    )


dataflow_dag = nightly_dag("Dataflow", _dataflow_convert)
flink_dag = nightly_dag("Flink", _flink_convert)
