"""The deployment files agree with ``rumi convert``: Dataflow template parameters and the Flink command.

The Flink job-server jar and the Dataflow service cannot be reached here, so
these tests check what can be checked locally: the Flex Template's
``metadata.json`` names exactly ``rumi convert``'s options (less those the
launcher sets), the launcher turns template parameters into a command the CLI
accepts and submits detached, and Beam's option parser accepts the options of
``deploy/flink/run.sh`` with the values intended. The external worker pool
itself is exercised in ``test_runners.py`` and ``test_gcs_runners.py``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
from pathlib import Path
from typing import Any

from apache_beam.options.pipeline_options import FlinkRunnerOptions, PipelineOptions, PortableOptions, StandardOptions

from pipelines.cli import convert_command, split_beam_args

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _launcher() -> Any:
    spec = importlib.util.spec_from_file_location("flex_main", DEPLOY / "dataflow" / "main.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_template_parameters_are_the_commands_options() -> None:
    launcher = _launcher()
    metadata = json.loads((DEPLOY / "dataflow" / "metadata.json").read_text())
    names = [p["name"] for p in metadata["parameters"]]
    options = {p.opts[0][2:].replace("-", "_") for p in convert_command.params if p.opts[0].startswith("--")}
    expected = {"inputs"} | options - {o.replace("-", "_") for o in launcher.LAUNCHER_OWNED}
    assert len(names) == len(set(names))
    assert set(names) == expected
    required = {p["name"] for p in metadata["parameters"] if not p["isOptional"]}
    assert required == {"inputs", "out"}


def test_launcher_submits_a_command_the_cli_parses() -> None:
    args = _launcher().convert_args(
        [
            "--inputs=gs://a/x/*.tif,gs://a/y.tif",
            "--out=gs://c/run",
            "--tile_size=256",
            "--no_catalog=true",
            "--overwrite=false",
            "--project=p",
            "--region=europe-west4",
        ]
    )
    assert args[:2] == ["gs://a/x/*.tif", "gs://a/y.tif"]
    assert "--no-catalog" in args and "--detach" in args and "--runner=DataflowRunner" in args and "--overwrite" not in args
    context = convert_command.make_context("rumi convert", list(args))
    assert context.params["out"] == "gs://c/run" and context.params["tile_size"] == 256 and context.params["detach"]
    inputs, beam_args = split_beam_args(context.params["inputs"])
    assert inputs == ["gs://a/x/*.tif", "gs://a/y.tif"] and beam_args == ["--project=p", "--region=europe-west4"]


def test_beam_accepts_the_flink_command() -> None:
    script = (DEPLOY / "flink" / "run.sh").read_text()
    command = script[script.index("exec rumi convert") :].replace("\\\n", " ").splitlines()[0]
    env = {"FLINK_MASTER": "flink-jobmanager:8081", "WORKER_POOL": "localhost:50000", "PARALLELISM": "4"}
    command = re.sub(r"\$\{(\w+):-[^}]*\}", lambda m: env[m.group(1)], command).replace('"$@"', "")
    tokens = shlex.split(command)[3:]  # after "exec rumi convert"
    tokens = [t.replace("$inputs", "gs://a/*.tif").replace("$out", "gs://c/run") for t in tokens]
    context = convert_command.make_context("rumi convert", tokens)
    assert context.params["runner"] == "FlinkRunner" and context.params["out"] == "gs://c/run"
    inputs, beam_args = split_beam_args(context.params["inputs"])
    assert inputs == ["gs://a/*.tif"]
    options = PipelineOptions(beam_args)
    assert options.view_as(FlinkRunnerOptions).flink_master == "flink-jobmanager:8081"
    assert options.view_as(FlinkRunnerOptions).parallelism == 4
    portable = options.view_as(PortableOptions)
    assert portable.environment_type == "EXTERNAL" and portable.environment_config == "localhost:50000"
    assert options.view_as(StandardOptions).runner is None  # the runner is rumi convert's own --runner option
    unknown = PipelineOptions(beam_args).get_all_options(retain_unknown_options=True)
    assert not [a for a in beam_args if a.split("=", 1)[0][2:] not in unknown]
