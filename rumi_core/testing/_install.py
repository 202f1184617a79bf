"""Installing packages into a virtual environment: with uv where it is available, with pip otherwise.

uv resolves, downloads and unpacks in parallel. On this project's 2-core
machine, from an empty cache, ``-e '.[test]'`` and the CPU torch wheel took
2 min 30 s with pip and 47 s with uv, and both chose the same 156 releases.
uv reads no pip configuration, so the options of ``pip config list`` that say
where packages come from are passed to it as command-line options. Where pip's
configuration holds an option this module does not carry over, pip installs:
then the two could choose different releases.

Run as a script (the Makefile does, before anything is installed), it installs
uv into the environment first and falls back to pip where uv cannot be had::

    python rumi_core/testing/_install.py .venv/bin/python -e '.[test]'

Only the standard library is imported here, so the script runs before the
package it installs.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

_CARRIED = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
}
"""pip options (names as ``pip config list`` prints them) that decide which releases are installed, and uv's spelling."""

_HARMLESS = frozenset(
    [
        "cert",
        "config-file",
        "timeout",
        "default-timeout",
        "disable-pip-version-check",
        "no-input",
        "quiet",
        "progress-bar",
        "root-user-action",
        "no-cache-dir",
    ]
)
"""pip options that change how pip talks or prints (or where its configuration was read), not what it installs.

``cert`` becomes uv's ``SSL_CERT_FILE``.
"""

_PRECEDENCE = {"global": 0, "install": 1, ":env:": 2}
"""pip's order among the sections that apply to ``pip install``: environment variables win over files."""


def _pip_config(python: str | Path) -> dict[str, str] | None:
    """The configuration ``pip install`` would use in ``python``'s environment, by option; None if pip cannot say."""
    try:
        listed = subprocess.run([str(python), "-m", "pip", "config", "list"], capture_output=True, text=True, check=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    chosen: dict[str, tuple[int, str]] = {}
    for line in listed.stdout.splitlines():
        key, sep, text = line.partition("=")
        section, _, name = key.rpartition(".")
        if not sep or section not in _PRECEDENCE:
            continue  # another command's section (pip download, pip freeze)
        rank = _PRECEDENCE[section]
        if name not in chosen or chosen[name][0] <= rank:
            chosen[name] = (rank, str(ast.literal_eval(text)))  # pip prints each value as a Python literal
    return {name: value for name, (_, value) in chosen.items()}


def uv_arguments(python: str | Path) -> tuple[list[str], dict[str, str]] | None:
    """uv options and environment variables that make uv install from where pip in ``python``'s environment would.

    Returns None when pip's configuration holds an option that could change
    which releases are chosen and that is not carried over.
    """
    config = _pip_config(python)
    if config is None or set(config) - set(_CARRIED) - _HARMLESS:
        return None
    options: list[str] = []
    for name, flag in _CARRIED.items():
        for value in config.get(name, "").split():
            options += [flag, value]
    env = {"SSL_CERT_FILE": config["cert"]} if "cert" in config and "SSL_CERT_FILE" not in os.environ else {}
    return options, env


def install_command(python: str | Path, requirements: Sequence[str], uv: Path | None) -> tuple[list[str], dict[str, str]]:
    """The command (and environment variables to add) that installs ``requirements`` into ``python``'s environment.

    uv (at ``uv``, when given and when pip's configuration carries over) picks,
    as pip does, the highest release any index offers, and compiles bytecode,
    as pip does; otherwise it is pip itself.
    """
    carried = uv_arguments(python) if uv is not None and uv.exists() else None
    if uv is None or carried is None:
        return [str(python), "-m", "pip", "install", "--quiet", "--no-input", "--disable-pip-version-check", *requirements], {}
    options, env = carried
    command = [str(uv), "pip", "install", "--python", str(python), "--quiet", "--compile-bytecode", "--index-strategy", "unsafe-best-match"]
    return [*command, *options, *requirements], env


def bundled_uv(python: str | Path = sys.executable) -> Path | None:
    """The uv installed beside interpreter ``python`` (this one by default), if any."""
    uv = Path(python).with_name("uv")
    return uv if uv.exists() else None


def main(argv: Sequence[str]) -> int:
    """Install ``argv[1:]`` into the environment of interpreter ``argv[0]``, with uv if it can be installed there."""
    python, *requirements = argv
    got_uv = subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "uv"], check=False).returncode == 0
    uv = bundled_uv(python) if got_uv else None
    if uv is None:
        print("uv could not be installed: installing with pip", file=sys.stderr)
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=False)  # the venv's own pip will do
    command, env = install_command(python, requirements, uv)
    return subprocess.run(command, env={**os.environ, **env}, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
