"""Flex Template launcher: turn the template's parameters into ``rumi convert`` arguments and submit the job.

Dataflow starts this file with every template parameter as ``--name=value``
(names as in ``metadata.json``: ``rumi convert``'s options with ``_`` for
``-``) and with its own pipeline options (project, region, temp_location,
sdk_container_image...). Flags arrive as ``--name=true|false``; ``inputs`` is a
comma-separated list. The job is submitted with ``--detach``, so the launcher
returns as soon as Dataflow has accepted it (a launcher that waits would hold
the launch VM for the whole conversion).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Final

from pipelines.cli import convert_command
from pipelines.convert import main

if TYPE_CHECKING:
    from collections.abc import Sequence

LAUNCHER_OWNED: Final = ("runner", "strict", "detach", "progress")
"""``rumi convert`` options the launcher sets itself, so they are no template parameters."""


def convert_args(argv: Sequence[str]) -> list[str]:
    """``rumi convert`` arguments for the template's ``--name=value`` arguments."""
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
    return [*inputs, *out, "--runner=DataflowRunner", "--detach", "--no-progress"]


if __name__ == "__main__":
    raise SystemExit(main(convert_args(sys.argv[1:])))
