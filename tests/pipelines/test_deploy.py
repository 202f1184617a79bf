"""The deployment files agree with ``rumi convert``: Dataflow template parameters and the Flink command.

The Flink job-server jar and the Dataflow service cannot be reached here, so
these tests check what can be checked locally: the Flex Template's
``metadata.json`` names exactly ``rumi convert``'s options (less those the
launcher sets), the launcher turns template parameters into a command the CLI
accepts and submits detached, Cloud Scheduler's ``launch.json`` passes only
parameters the template declares, Beam's option parser accepts the options of
``deploy/flink/run.sh`` with the values intended (the Flink version among them,
that of the cluster files' image), and ``kubernetes.yaml`` is applied with its
image placeholders filled in. The external worker pool itself is exercised in
``test_runners.py`` and ``test_gcs_runners.py``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from apache_beam.options.pipeline_options import FlinkRunnerOptions, PipelineOptions, PortableOptions, StandardOptions

from pipelines.cli import convert_command, split_beam_args

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"


def test_template_parameters_are_the_commands_options(flex_launcher: Any) -> None:
    launcher = flex_launcher
    metadata = json.loads((DEPLOY / "dataflow" / "metadata.json").read_text())
    names = [p["name"] for p in metadata["parameters"]]
    options = {p.opts[0][2:].replace("-", "_") for p in convert_command.params if p.opts[0].startswith("--")}
    expected = {"inputs"} | options - {o.replace("-", "_") for o in launcher.LAUNCHER_OWNED}
    assert len(names) == len(set(names))
    assert set(names) == expected
    required = {p["name"] for p in metadata["parameters"] if not p["isOptional"]}
    assert required == {"out"}  # inputs may be left out for a --stac-api search, which finds its own


def test_launcher_submits_a_command_the_cli_parses(flex_launcher: Any) -> None:
    args = flex_launcher.convert_args(
        [
            "--inputs=gs://a/x/*.tif,gs://a/y.tif",
            "--out=gs://c/run",
            "--tile_size=256",
            "--no_catalog=true",
            "--overwrite=false",
            "--project=p",
            "--region=europe-west4",
        ],
        {flex_launcher.WORKER_IMAGE: "europe-west4-docker.pkg.dev/p/rumi/rumi-convert:latest"},
    )
    assert args[:2] == ["gs://a/x/*.tif", "gs://a/y.tif"]
    assert "--no-catalog" in args and "--detach" in args and "--runner=DataflowRunner" in args and "--overwrite" not in args
    context = convert_command.make_context("rumi convert", list(args))
    assert context.params["out"] == "gs://c/run" and context.params["tile_size"] == 256 and context.params["detach"]
    inputs, beam_args = split_beam_args(context.params["inputs"])
    assert inputs == ["gs://a/x/*.tif", "gs://a/y.tif"]
    image = "--sdk_container_image=europe-west4-docker.pkg.dev/p/rumi/rumi-convert:latest"
    assert beam_args == ["--project=p", "--region=europe-west4", image]


def test_the_workers_run_the_templates_own_image(flex_launcher: Any) -> None:
    """Dataflow's default worker image is Beam's, without rumi: the launcher names the image the Dockerfile recorded,
    keeps a launch's own choice, and refuses a launch with neither."""
    named = {flex_launcher.WORKER_IMAGE: "r/rumi:1"}
    assert "--sdk_container_image=r/rumi:1" in flex_launcher.convert_args(["--out=gs://c/run"], named)
    given = flex_launcher.convert_args(["--out=gs://c/run", "--sdk_container_image=r/other:2"], named)
    assert [a for a in given if "container_image" in a] == ["--sdk_container_image=r/other:2"]
    empty = flex_launcher.convert_args(["--out=gs://c/run", "--sdk_container_image="], named)
    assert [a for a in empty if "container_image" in a] == ["--sdk_container_image=r/rumi:1"]
    with pytest.raises(SystemExit, match="WORKER_IMAGE"):
        flex_launcher.convert_args(["--out=gs://c/run"], {})
    dockerfile = (DEPLOY / "dataflow" / "Dockerfile").read_text()
    assert re.search(rf"^ENV {flex_launcher.WORKER_IMAGE}=\$\{{WORKER_IMAGE\}}$", dockerfile, re.MULTILINE)
    assert '--build-arg, "WORKER_IMAGE=$image"' in (DEPLOY / "dataflow" / "run.sh").read_text()


def _template_parameters() -> dict[str, dict[str, Any]]:
    metadata = json.loads((DEPLOY / "dataflow" / "metadata.json").read_text())
    return {p["name"]: p for p in metadata["parameters"]}


def test_cloud_scheduler_launches_the_template_with_its_declared_parameters(flex_launcher: Any) -> None:
    """Dataflow refuses a launch whose parameters ``metadata.json`` does not declare (``stac-api`` for ``stac_api``)."""
    launch = json.loads((DEPLOY / "scheduler" / "launch.json").read_text())["launchParameter"]
    parameters = launch["parameters"]
    declared = _template_parameters()
    assert not set(parameters) - set(declared), "not declared in deploy/dataflow/metadata.json"
    assert not {n for n, p in declared.items() if not p["isOptional"]} - set(parameters)
    for name, value in parameters.items():
        for regex in declared[name].get("regexes", []):
            assert re.fullmatch(regex, value), (name, value)
    # Dataflow workers share no disk: the output is a bucket, a placeholder like run.sh's.
    assert parameters["out"].startswith("gs://BUCKET/")
    assert launch["containerSpecGcsPath"] == "gs://BUCKET/templates/rumi-convert.json"
    args = flex_launcher.convert_args([f"--{name}={value}" for name, value in parameters.items()], {flex_launcher.WORKER_IMAGE: "image"})
    context = convert_command.make_context("rumi convert", list(args))
    assert context.params["stac_api"] == parameters["stac_api"] and context.params["max_cloud"] == 60.0
    assert context.params["cube_period"] == "P1M" and context.params["out"] == parameters["out"]
    # Every parameter became a rumi convert option; the workers run the template's own image.
    assert split_beam_args(context.params["inputs"]) == ([], ["--sdk_container_image=image"])


def _dataflow_run_parameters() -> dict[str, str]:
    """The template parameters ``deploy/dataflow/run.sh`` launches with (gcloud's ``^DELIMITER^`` syntax), for inputs and out."""
    script = (DEPLOY / "dataflow" / "run.sh").read_text()
    found = re.search(r"--parameters \^(.)\^(\S+)$", script, re.MULTILINE)
    assert found is not None, "run.sh passes no --parameters ^DELIMITER^..."
    delimiter, value = found.groups()
    value = value.replace('"$1"', "gs://a/x/*.tif,gs://a/y.tif").replace('"$2"', "gs://c/run")
    pairs = [p.split("=", 1) for p in value.split(delimiter)]
    assert all(len(p) == 2 for p in pairs), value
    return dict(pairs)


def _flink_command(env: dict[str, str]) -> list[str]:
    """The arguments ``deploy/flink/run.sh`` gives ``rumi convert``, for ``env`` (every variable it reads)."""
    script = (DEPLOY / "flink" / "run.sh").read_text()
    command = script[script.index("exec rumi convert") :].replace("\\\n", " ").splitlines()[0]
    command = re.sub(r"\$\{(\w+):-[^}]*\}", lambda m: env[m.group(1)], command).replace('"$@"', "")
    tokens = shlex.split(command)[3:]  # after "exec rumi convert"
    return [t.replace("$inputs", "gs://a/*.tif").replace("$out", "gs://c/run") for t in tokens]


def _images(text: str) -> list[str]:
    """The ``image:`` values of a compose or Kubernetes file."""
    return [m.group(1) for m in re.finditer(r"^\s*image:\s*[\"']?(\S+?)[\"']?\s*$", text, re.MULTILINE)]


def _cluster_flink_versions() -> dict[str, set[str]]:
    """The Flink version (major.minor) of every ``flink:`` image of each cluster file of ``deploy/flink``."""
    versions: dict[str, set[str]] = {}
    for name in ("docker-compose.yml", "kubernetes.yaml"):
        tags = [image.split(":", 1)[1] for image in _images((DEPLOY / "flink" / name).read_text()) if image.startswith("flink:")]
        assert tags, f"no flink: image in {name}"
        versions[name] = {".".join(tag.split("-")[0].split(".")[:2]) for tag in tags}
    return versions


def test_beam_accepts_the_flink_command() -> None:
    env = {"FLINK_MASTER": "flink-jobmanager:8081", "WORKER_POOL": "localhost:50000", "PARALLELISM": "4"}
    context = convert_command.make_context("rumi convert", _flink_command(env))
    assert context.params["runner"] == "FlinkRunner" and context.params["out"] == "gs://c/run"
    assert not context.params["detach"]  # waits for the job, as the Flink DAG's convert task must
    inputs, beam_args = split_beam_args(context.params["inputs"])
    assert inputs == ["gs://a/*.tif"]
    options = PipelineOptions(beam_args)
    assert options.view_as(FlinkRunnerOptions).flink_master == "flink-jobmanager:8081"
    assert options.view_as(FlinkRunnerOptions).parallelism == 4
    # The pipeline and its staged files go to the JobManager in one jar: the TaskManagers cannot read a local job server's.
    assert options.view_as(FlinkRunnerOptions).flink_submit_uber_jar
    portable = options.view_as(PortableOptions)
    assert portable.environment_type == "EXTERNAL" and portable.environment_config == "localhost:50000"
    assert options.view_as(StandardOptions).runner is None  # the runner is rumi convert's own --runner option
    unknown = PipelineOptions(beam_args).get_all_options(retain_unknown_options=True)
    assert not [a for a in beam_args if a.split("=", 1)[0][2:] not in unknown]


def test_the_flink_command_names_the_clusters_flink_version() -> None:
    """Without ``--flink_version`` Beam picks its newest Flink, not the ``flink:1.19`` the cluster files run."""
    env = {"FLINK_MASTER": "localhost:8081", "WORKER_POOL": "localhost:50000", "PARALLELISM": "2"}
    context = convert_command.make_context("rumi convert", _flink_command(env))
    _, beam_args = split_beam_args(context.params["inputs"])
    assert [a for a in beam_args if a.startswith("--flink_version=")], "run.sh passes no --flink_version"
    version = PipelineOptions(beam_args).view_as(FlinkRunnerOptions).flink_version
    assert version in FlinkRunnerOptions.PUBLISHED_FLINK_VERSIONS
    assert _cluster_flink_versions() == {"docker-compose.yml": {version}, "kubernetes.yaml": {version}}


def test_the_run_scripts_write_the_catalogue(flex_launcher: Any) -> None:
    """A bucket ``--out`` takes its STAC catalogue (``OUT/stac``), as the scheduler's runs do: neither run script turns it off."""
    parameters = _dataflow_run_parameters()
    assert not set(parameters) - set(_template_parameters()), "not declared in deploy/dataflow/metadata.json"
    args = flex_launcher.convert_args([f"--{name}={value}" for name, value in parameters.items()], {flex_launcher.WORKER_IMAGE: "image"})
    dataflow = convert_command.make_context("rumi convert", list(args))
    assert dataflow.params["out"] == "gs://c/run" and not dataflow.params["no_catalog"]
    assert split_beam_args(dataflow.params["inputs"])[0] == ["gs://a/x/*.tif", "gs://a/y.tif"]
    flink = convert_command.make_context(
        "rumi convert", _flink_command({"FLINK_MASTER": "m:8081", "WORKER_POOL": "p:50000", "PARALLELISM": "2"})
    )
    assert flink.params["out"] == "gs://c/run" and not flink.params["no_catalog"]


def _kubectl_applies() -> list[tuple[str, str]]:
    """Every ``kubectl apply`` of ``kubernetes.yaml`` the docs give: (where, command line)."""
    found = []
    for path in (DEPLOY / "README.md", DEPLOY / "flink" / "kubernetes.yaml", DEPLOY / "flink" / "docker-compose.yml"):
        for line in path.read_text().splitlines():
            if "kubectl apply -f" in line:
                found.append((path.name, line.lstrip("# ").strip()))
    return found


def test_kubernetes_yaml_is_applied_with_its_image_placeholders_filled_in() -> None:
    """``kubernetes.yaml`` names its worker image ``REGION-docker.pkg.dev/PROJECT/...``: applied as it is, no pod starts."""
    script = (DEPLOY / "dataflow" / "run.sh").read_text()
    pushed = re.search(r'^image="(.+)"$', script, re.MULTILINE)
    assert pushed is not None
    values = {"PROJECT": "proj-1", "REGION": "europe-west4"}
    expected = re.sub(r"\$\{(\w+)\}", lambda m: values[m.group(1)], pushed.group(1))
    applies = _kubectl_applies()
    assert applies
    for where, line in applies:
        assert line.endswith("| kubectl apply -f -"), f"{where} applies kubernetes.yaml as it is: {line}"
        render = line.removesuffix("| kubectl apply -f -")
        assert "deploy/flink/kubernetes.yaml" in render
        proc = subprocess.run(
            ["bash", "-c", render], capture_output=True, text=True, cwd=REPO, env={**os.environ, **values}, timeout=60, check=False
        )
        assert proc.returncode == 0, proc.stderr
        images = _images(proc.stdout)
        assert expected in images, (where, images)
        assert not [i for i in images if "PROJECT" in i or "REGION" in i], (where, images)


def test_the_systemd_unit_runs_a_command_the_cli_parses() -> None:
    """The nightly unit's ExecStart parses as rumi convert, makes monthly cubes, prunes the earlier nights', fails on a dead
    letter, reads a folder (every raster suffix, in any case) and runs on worker processes."""
    unit = (DEPLOY / "schedule" / "rumi-convert.service").read_text()
    (exec_start,) = re.findall(r"^ExecStart=((?:.*\\\n)*.*)", unit, flags=re.MULTILINE)
    tokens = shlex.split(exec_start.replace("\\\n", " "))
    assert tokens[0].endswith("/rumi") and tokens[1] == "convert"
    context = convert_command.make_context("rumi convert", tokens[2:])
    assert context.params["prune"] and context.params["out"] == "/srv/cubes"
    assert context.params["cube_period"] == "P1M"  # a night rewrites the months that gained scenes, not the whole series
    inputs, beam_args = split_beam_args(context.params["inputs"])
    assert inputs == ["/srv/scenes"] and context.params["strict"]
    assert PipelineOptions(beam_args).get_all_options()["direct_running_mode"] == "multi_processing"


def test_the_docker_build_context_holds_what_the_dockerfile_copies_and_no_virtual_environment() -> None:
    """``docker build .`` sent ``.venv``, ``.venv-airflow`` and ``.venv-peer`` (about 4 GB after ``make test``) as context."""
    import fnmatch

    rules = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines() if line.strip() and not line.startswith("#")]

    def sent(path: str) -> bool:
        keep = True
        for rule in rules:  # Docker's order: the last matching rule decides
            negated = rule.startswith("!")
            pattern = rule.lstrip("!").rstrip("/")
            if fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/") or fnmatch.fnmatch(path, pattern.replace("**/", "*/")):
                keep = negated
        return keep

    dockerfile = (DEPLOY / "dataflow" / "Dockerfile").read_text()
    copied = [
        source for line in dockerfile.splitlines() if line.startswith("COPY ") and "--from" not in line for source in line.split()[1:-1]
    ]
    assert copied and all(sent(source) for source in copied), copied
    assert sent("rumi_core/reader.py") and sent("catalog/cube.py") and sent("pipelines/cli.py")
    for unwanted in (
        ".venv/lib/python3.11/site.py",
        ".venv-airflow/bin/python",
        ".git/HEAD",
        "tests/conftest.py",
        "rumi_core/__pycache__/x.pyc",
    ):
        assert not sent(unwanted), unwanted


def test_template_parameters_of_choices_and_numbers_are_checked_by_dataflow() -> None:
    """Their values were taken as any text, and a misspelt one (``cube_period=P1m``) failed only inside the launcher VM,
    after the launch, in a log: each choice and number now carries the regex Dataflow checks at the launch."""
    import click

    declared = _template_parameters()
    checked = 0
    for param in convert_command.params:
        name = param.opts[0][2:].replace("-", "_")
        if name not in declared or not isinstance(param.type, (click.Choice, click.types.IntParamType, click.types.FloatParamType)):
            continue
        (regex,) = declared[name].get("regexes", [None])
        assert regex is not None, name
        if isinstance(param.type, click.Choice):
            assert all(re.fullmatch(regex, str(choice)) for choice in param.type.choices), name
            assert not any(re.fullmatch(regex, bad) for bad in ("P1m", "", "nearest,bilinear", "x")), name
            assert all(str(choice) in declared[name]["helpText"] for choice in param.type.choices), name
        else:
            good = ("256", "0") if isinstance(param.type, click.types.IntParamType) else ("0.5", "12", "1e-3", ".25")
            assert all(re.fullmatch(regex, value) for value in good) and not re.fullmatch(regex, "ten"), name
            if isinstance(param.type, click.types.IntParamType):
                assert not re.fullmatch(regex, "2.5"), name
            for value in good:
                assert param.type.convert(value, param, None) is not None  # what the regex lets through, the command takes
        checked += 1
    assert checked >= 10
