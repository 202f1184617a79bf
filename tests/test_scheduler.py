"""The Airflow DAGs of ``deploy/scheduler`` import, and their task graphs are the documented ones.

apache-airflow (with the Google and Apache Beam providers) lives in its own
environment, ``<repo>/.venv-airflow``, built by the first run of this test
(a minute or more, started in the background as soon as the test is collected so
that it overlaps the rest of the suite; later runs reuse it). Where it cannot be installed the test
skips with the reason, unless ``RUMI_REQUIRE_AIRFLOW=1`` turns that into a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rumi_core.testing import VirtualEnvironment

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
DAG_FILE = REPO / "deploy" / "scheduler" / "rumi_sentinel2_dag.py"
AIRFLOW = VirtualEnvironment(
    path=REPO / ".venv-airflow",
    # Pinned to the releases pip chose: without the pins, uv's resolver backtracks to apache-beam 2.3.0,
    # an sdist that no longer builds. apache-beam is the release rumi's own environment has.
    packages=(
        "apache-airflow==3.3.2",
        "apache-airflow-providers-google==22.8.0",
        "apache-airflow-providers-apache-beam==6.3.1",
        "apache-beam==2.77.0",
    ),
    probe="import airflow.providers.google.cloud.operators.dataflow, airflow.providers.apache.beam.operators.beam, airflow; print('ok')",
    expect="ok",
)

# Imports the DAG file in a fresh interpreter and prints each DAG's tasks: operator class and upstream task ids.
DESCRIBE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("rumi_sentinel2_dag", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
dags = {d.dag_id: d for d in (module.dataflow_dag, module.flink_dag)}
print(json.dumps({
    "documented": module.TASKS,
    "dags": {dag_id: {t.task_id: {"operator": type(t).__name__, "upstream": sorted(t.upstream_task_ids)} for t in dag.tasks}
             for dag_id, dag in dags.items()},
    "schedule": {dag_id: str(getattr(dag, "schedule", None) or dag.timetable.summary) for dag_id, dag in dags.items()},
    "catchup": {dag_id: dag.catchup for dag_id, dag in dags.items()},
    "max_active_runs": {dag_id: dag.max_active_runs for dag_id, dag in dags.items()},
    "dataflow_parameters": dags["rumi_sentinel2_dataflow"].get_task("convert").body["launchParameter"]["parameters"],
    "beam_options": dags["rumi_sentinel2_flink"].get_task("convert").pipeline_options,
}))
"""


def _unavailable(reason: str) -> None:
    if os.environ.get("RUMI_REQUIRE_AIRFLOW") == "1":
        pytest.fail(f"apache-airflow is required (RUMI_REQUIRE_AIRFLOW=1) but unavailable: {reason}")
    pytest.skip(f"apache-airflow environment unavailable: {reason}")


@pytest.fixture(scope="session")
def airflow_python() -> Path:
    """An interpreter with apache-airflow and the providers the DAGs use, in its own virtual environment."""
    reason = AIRFLOW.build()
    if reason is not None:
        _unavailable(reason)
    return AIRFLOW.python


def test_the_dags_import_and_their_task_graph_is_the_documented_one(airflow_python: Path, tmp_path: Path) -> None:
    env = {
        **AIRFLOW.environ(),
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
    }
    env["AIRFLOW_VAR_RUMI_S2_MGRS"] = "32UQD"
    proc = subprocess.run(
        [str(airflow_python), "-c", DESCRIBE, str(DAG_FILE)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    documented = {task: sorted(up) for task, up in found["documented"].items()}
    assert documented == {"convert": [], "list_new_cubes": ["convert"]}
    for dag_id, convert_operator in (
        ("rumi_sentinel2_dataflow", "DataflowStartFlexTemplateOperator"),
        ("rumi_sentinel2_flink", "BeamRunPythonPipelineOperator"),
    ):
        tasks = found["dags"][dag_id]
        assert {t: v["upstream"] for t, v in tasks.items()} == documented
        assert tasks["convert"]["operator"] == convert_operator
        assert tasks["list_new_cubes"]["operator"] == "BashOperator"
        assert found["catchup"][dag_id] is False and found["max_active_runs"][dag_id] == 1
        assert "0 3 * * *" in found["schedule"][dag_id]
    for options in (found["dataflow_parameters"], found["beam_options"]):
        assert options["stac-api"].startswith("https://") and options["cube-period"] == "P1M"
        assert options["datetime"].endswith("/..") and options["mgrs"] == "32UQD"  # a setting from the environment
    assert found["beam_options"]["job_endpoint"] and found["beam_options"]["environment_type"] == "EXTERNAL"


if __name__ == "__main__":
    # ``python tests/test_scheduler.py`` builds the environment (what conftest starts in the background).
    sys.exit(0 if AIRFLOW.build() is None else 1)
