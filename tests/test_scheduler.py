"""The Airflow DAGs of ``deploy/scheduler`` import, their task graphs are the documented ones, and ``convert`` runs what is meant.

The Dataflow DAG launches the Flex Template with parameters ``metadata.json``
declares; the Flink DAG's command is parsed by ``rumi convert``'s own parser
and Beam's, so the runner that would run, ``--detach`` and the Flink options are
the ones the command really gives, and the same as ``deploy/flink/run.sh``'s.

apache-airflow (with the Google and Apache Beam providers) lives in its own
environment, ``<repo>/.venv-airflow``, built by the first run of this test
(a minute or more, started in the background as soon as the test is collected so
that it overlaps the rest of the suite; later runs reuse it). Where it cannot be installed the test
skips with the reason, unless ``RUMI_REQUIRE_AIRFLOW=1`` turns that into a failure.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from apache_beam.options.pipeline_options import FlinkRunnerOptions, PipelineOptions, PortableOptions, StandardOptions

from pipelines.cli import convert_command, split_beam_args
from rumi_core.testing import VirtualEnvironment

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
DAG_FILE = DEPLOY / "scheduler" / "rumi_sentinel2_dag.py"
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

# Imports the DAG file in a fresh interpreter and prints each DAG's tasks: operator class and upstream task ids,
# and the command line the Flink DAG's convert task runs (a Beam operator's as its hook would start it, without starting it).
DESCRIBE = """
import importlib.util, json, os, shlex, sys
spec = importlib.util.spec_from_file_location("rumi_sentinel2_dag", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
dags = {d.dag_id: d for d in (module.dataflow_dag, module.flink_dag)}

def command(task):
    if hasattr(task, "bash_command"):
        return shlex.split(task.bash_command)
    import airflow.providers.apache.beam.hooks.beam as hook
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]  # the hook asks python3 for Beam
    started = []
    hook.run_beam_command = lambda cmd, *args, **kwargs: started.append(cmd)
    try:
        task.execute(context={})
    except Exception:
        pass
    return started[0] if started else None
print(json.dumps({
    "documented": module.TASKS,
    "dags": {dag_id: {t.task_id: {"operator": type(t).__name__, "upstream": sorted(t.upstream_task_ids)} for t in dag.tasks}
             for dag_id, dag in dags.items()},
    "schedule": {dag_id: str(getattr(dag, "schedule", None) or dag.timetable.summary) for dag_id, dag in dags.items()},
    "catchup": {dag_id: dag.catchup for dag_id, dag in dags.items()},
    "max_active_runs": {dag_id: dag.max_active_runs for dag_id, dag in dags.items()},
    "dataflow_launch": dags["rumi_sentinel2_dataflow"].get_task("convert").body["launchParameter"],
    "dataflow_waits": dags["rumi_sentinel2_dataflow"].get_task("convert").wait_until_finished,
    "flink_command": command(dags["rumi_sentinel2_flink"].get_task("convert")),
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


@pytest.fixture(scope="module")
def described(airflow_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """:data:`DESCRIBE` of the DAG file, with two settings from the environment (``AIRFLOW_VAR_RUMI_S2_<KEY>``)."""
    tmp_path = tmp_path_factory.mktemp("airflow")
    variables = {"mgrs": "32UQD", "flink_master": "flink-jobmanager:8081"}
    env = {
        **AIRFLOW.environ(),
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
    }
    env.update({f"AIRFLOW_VAR_RUMI_S2_{key.upper()}": value for key, value in variables.items()})
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
    found: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return found


def test_the_dags_import_and_their_task_graph_is_the_documented_one(described: dict[str, Any]) -> None:
    found = described
    documented = {task: sorted(up) for task, up in found["documented"].items()}
    assert documented == {"convert": [], "list_new_cubes": ["convert"]}
    for dag_id, convert_operator in (
        ("rumi_sentinel2_dataflow", "DataflowStartFlexTemplateOperator"),
        ("rumi_sentinel2_flink", "BashOperator"),
    ):
        tasks = found["dags"][dag_id]
        assert {t: v["upstream"] for t, v in tasks.items()} == documented
        assert tasks["convert"]["operator"] == convert_operator
        assert tasks["list_new_cubes"]["operator"] == "BashOperator"
        assert found["catchup"][dag_id] is False and found["max_active_runs"][dag_id] == 1
        assert "0 3 * * *" in found["schedule"][dag_id]


def _template_parameters() -> dict[str, dict[str, Any]]:
    metadata = json.loads((DEPLOY / "dataflow" / "metadata.json").read_text())
    return {p["name"]: p for p in metadata["parameters"]}


def test_the_dataflow_dag_launches_the_template_with_its_declared_parameters(described: dict[str, Any], flex_launcher: Any) -> None:
    """Dataflow checks a launch's parameters against ``metadata.json``: ``stac_api``, never ``stac-api``."""
    found = described
    launch, parameters = found["dataflow_launch"], found["dataflow_launch"]["parameters"]
    declared = _template_parameters()
    assert not set(parameters) - set(declared), "not declared in deploy/dataflow/metadata.json"
    assert not {n for n, p in declared.items() if not p["isOptional"]} - set(parameters)
    assert launch["containerSpecGcsPath"] == "gs://BUCKET/templates/rumi-convert.json"
    assert parameters["out"].startswith("gs://BUCKET/")  # workers share no disk; a placeholder to set
    assert found["dataflow_waits"] is True  # list_new_cubes starts once the job has finished
    image = {flex_launcher.WORKER_IMAGE: "REGION-docker.pkg.dev/PROJECT/rumi/rumi-convert:latest"}
    args = flex_launcher.convert_args([f"--{k}={v}" for k, v in parameters.items()], image)
    context = convert_command.make_context("rumi convert", args)
    assert context.params["stac_api"].startswith("https://") and context.params["cube_period"] == "P1M"
    assert context.params["datetime_"].endswith("/..") and context.params["mgrs"] == "32UQD"  # a setting from the environment
    assert context.params["max_cloud"] == 60.0 and context.params["out"] == parameters["out"]
    # Every parameter became a rumi convert option; the workers run the template's own image.
    assert split_beam_args(context.params["inputs"]) == ([], [f"--sdk_container_image={image[flex_launcher.WORKER_IMAGE]}"])


def _run_sh_beam_args() -> list[str]:
    """The Beam options of ``deploy/flink/run.sh``'s command, its defaults filled in."""
    script = (DEPLOY / "flink" / "run.sh").read_text()
    command = script[script.index("exec rumi convert") :].replace("\\\n", " ").splitlines()[0]
    command = re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", command).replace('"$@"', "")
    tokens = [t.replace("$inputs", "in.tif").replace("$out", "gs://c/run") for t in shlex.split(command)[3:]]
    return split_beam_args(convert_command.make_context("rumi convert", tokens).params["inputs"])[1]


def test_the_flink_dag_runs_rumi_convert_on_the_flink_cluster_and_waits(described: dict[str, Any], flex_launcher: Any) -> None:
    """The command is read as ``rumi convert`` reads it: the last ``--runner`` wins, and ``--detach`` would return at once."""
    found = described
    command = found["flink_command"]
    assert command, "the Flink DAG's convert task runs no command"
    if command[:2] == ["rumi", "convert"]:
        args = command[2:]
    else:  # python3 ENTRY_POINT ...: the one entry point deploy/ ships is the Flex Template launcher's
        assert Path(command[1]).name == "main.py", command
        args = flex_launcher.convert_args(command[2:], {flex_launcher.WORKER_IMAGE: "image"})
    context = convert_command.make_context("rumi convert", list(args))
    assert (context.params["runner"], context.params["detach"]) == ("FlinkRunner", False), args
    assert context.params["stac_api"].startswith("https://") and context.params["cube_period"] == "P1M"
    assert context.params["datetime_"].endswith("/..") and context.params["mgrs"] == "32UQD"
    assert context.params["out"] == found["dataflow_launch"]["parameters"]["out"]
    inputs, beam_args = split_beam_args(context.params["inputs"])
    assert inputs == []
    options = PipelineOptions(beam_args)
    assert options.view_as(StandardOptions).runner is None  # no second --runner for Beam to pick instead
    flink = options.view_as(FlinkRunnerOptions)
    assert flink.flink_master == "flink-jobmanager:8081" and flink.flink_submit_uber_jar
    portable = options.view_as(PortableOptions)
    assert portable.environment_type == "EXTERNAL" and portable.environment_config == "localhost:50000"
    assert portable.job_endpoint is None  # nothing in deploy/flink serves a job endpoint
    known = PipelineOptions(beam_args).get_all_options(retain_unknown_options=True)
    assert not [a for a in beam_args if a.split("=", 1)[0][2:] not in known]
    # The same Beam options as deploy/flink/run.sh, so the same Flink version: that of the cluster's image.
    run_sh = PipelineOptions(_run_sh_beam_args())
    assert flink.flink_version == run_sh.view_as(FlinkRunnerOptions).flink_version
    assert {a.split("=", 1)[0] for a in beam_args} == {a.split("=", 1)[0] for a in _run_sh_beam_args()}
    compose = (DEPLOY / "flink" / "docker-compose.yml").read_text()
    assert re.search(rf"image:\s*flink:{re.escape(flink.flink_version)}[.-]", compose)


if __name__ == "__main__":
    # ``python tests/test_scheduler.py`` builds the environment (what conftest starts in the background).
    sys.exit(0 if AIRFLOW.build() is None else 1)
