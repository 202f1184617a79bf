"""Flex Template launcher: turn the template's parameters into ``rumi convert`` arguments and submit the job.

Dataflow starts this file with every template parameter as ``--name=value``
(names as in ``metadata.json``: ``rumi convert``'s options with ``_`` for
``-``) and with its own pipeline options (project, region, temp_location,
sdk_container_image...). Flags arrive as ``--name=true|false``; ``inputs`` is a
comma-separated list. The job is submitted with ``--detach``, so the launcher
returns as soon as Dataflow has accepted it (a launcher that waits would hold
the launch VM for the whole conversion).

Dataflow starts a Python job's workers from Beam's stock SDK image unless
``sdk_container_image`` names another, and that image has none of rumi's
packages: every worker would fail its first import. The Dockerfile records the
image's own name (``--build-arg WORKER_IMAGE``), and the launcher passes it
whenever a launch names no worker image, so every launch (``run.sh``, Cloud
Scheduler's ``launch.json``, the Airflow DAG) runs its workers on this image.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Final

from pipelines import main
from pipelines.cli import convert_command

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

LAUNCHER_OWNED: Final = ("runner", "strict", "detach", "progress")
"""``rumi convert`` options the launcher sets itself, so they are no template parameters."""
WORKER_IMAGE: Final = "RUMI_WORKER_IMAGE"
"""Environment variable holding the image's own name, set by the Dockerfile's ``WORKER_IMAGE`` build argument."""
_IMAGE_OPTIONS: Final = ("--sdk_container_image=", "--worker_harness_container_image=")


def convert_args(argv: Sequence[str], environ: Mapping[str, str] = os.environ) -> list[str]:
    """``rumi convert`` arguments for the template's ``--name=value`` arguments.

    Raises:
        SystemExit: the launch names no worker image and the image does not know its own name.
    """
    options = {p.opts[0]: p for p in convert_command.params if p.opts[0].startswith("--")}
    inputs: list[str] = []
    out: list[str] = []
    for arg in argv:
        name, eq, value = arg.partition("=")
        option = "--" + name.lstrip("-").replace("_", "-")
        if name == "--inputs" and eq:
            inputs += [v for v in value.split(",") if v]
        elif eq and option in options and name.lstrip("-").replace("_", "-") not in LAUNCHER_OWNED:
            if getattr(options[option], "is_flag", False):
                out += [option] if value.lower() == "true" else []
            else:
                out += [f"{option}={value}"]
        else:
            out.append(arg)  # a Dataflow / Beam pipeline option
    if not any(arg.startswith(_IMAGE_OPTIONS) and arg.partition("=")[2] for arg in out):
        out = [arg for arg in out if not arg.startswith(_IMAGE_OPTIONS)]  # an empty one names no image
        image = environ.get(WORKER_IMAGE, "")
        if not image:
            raise SystemExit(
                f"error: no worker image: Dataflow would start the workers from Beam's stock image, which lacks rumi; "
                f"build this image with --build-arg WORKER_IMAGE=<its name> (deploy/dataflow/run.sh does), "
                f"or launch with the parameter sdk_container_image=<image> ({WORKER_IMAGE} is unset)"
            )
        out.append(f"--sdk_container_image={image}")
    return [*inputs, *out, "--runner=DataflowRunner", "--detach", "--no-progress"]


if __name__ == "__main__":
    raise SystemExit(main(convert_args(sys.argv[1:])))
