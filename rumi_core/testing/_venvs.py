"""Virtual environments of their own for peer tools whose pins clash with ours (rumi-eo, Airflow)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rumi_core.testing._install import bundled_uv, install_command

if TYPE_CHECKING:
    from pathlib import Path

RUMI_EO_VERSION = "0.26.1"
"""The reference implementation's release the interoperability tests and benchmarks compare with."""

_PROBE_SECONDS = 300
_INSTALL_SECONDS = 1800
_LOCK = ".rumi-build.lock"
"""The lock :meth:`VirtualEnvironment.build` holds; not ``.lock``, which uv takes while it installs."""


@dataclass(frozen=True)
class VirtualEnvironment:
    """A virtual environment at :attr:`path` with :attr:`packages` installed from the package index.

    Built on first use (:meth:`build`) and reused while :attr:`probe` still
    prints :attr:`expect` in it. Its processes run with :meth:`environ`, which
    keeps this interpreter's environment variables from leaking into theirs.
    """

    path: Path
    packages: tuple[str, ...]
    probe: str
    """Python code that prints :attr:`expect` when the environment is usable."""
    expect: str

    @property
    def python(self) -> Path:
        """The environment's interpreter."""
        return self.path / "bin" / "python"

    @staticmethod
    def environ() -> dict[str, str]:
        """This process's environment without what would point another interpreter at ours."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV")}
        env.update({"PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1"})
        return env

    def probe_output(self, python: Path | None = None) -> str | None:
        """What :attr:`probe` prints in ``python`` (default: :attr:`python`), or None when it cannot run."""
        python = python or self.python
        if not python.exists():
            return None
        try:
            proc = subprocess.run(
                [str(python), "-c", self.probe], capture_output=True, text=True, timeout=_PROBE_SECONDS, env=self.environ(), check=False
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    def build(self) -> str | None:
        """Create the environment unless a usable one exists; return why that failed, or None.

        Holds an exclusive lock on :attr:`path` while it works, so concurrent
        sessions (a background build started at collection and the fixture
        that needs it, several checkouts) build it once: the others wait.
        """
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / _LOCK, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.probe_output() == self.expect:
                return None
            failed = self._run([sys.executable, "-m", "venv", str(self.path)], {})
            if failed is None:
                # The pip configuration is read in the new environment, which has its pip.
                failed = self._run(*install_command(self.python, self.packages, bundled_uv()))
            if failed is not None:
                return failed
            found = self.probe_output()
            if found != self.expect:
                return f"after installing, {self.python} prints {found!r} for its probe, expected {self.expect!r}"
        return None

    def _run(self, cmd: list[str], extra: dict[str, str]) -> str | None:
        """Run one step of :meth:`build` with :meth:`environ` and ``extra``; return why it failed, or None."""
        try:
            env = {**self.environ(), **extra}
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=_INSTALL_SECONDS, env=env, check=False)
        except (OSError, subprocess.SubprocessError) as err:
            return f"{' '.join(cmd[:4])} failed: {err}"
        if proc.returncode != 0:
            return f"{' '.join(cmd)} exited {proc.returncode}:\n{(proc.stderr + proc.stdout).strip()[-1500:]}"
        return None


def rumi_eo_environment(repo: Path) -> VirtualEnvironment:
    """rumi-eo :data:`RUMI_EO_VERSION` (with its geozl and OpenZL) in ``<repo>/.venv-peer``.

    It pins an older geozl and OpenZL than rumi_core, so it cannot live beside it.
    """
    return VirtualEnvironment(
        path=repo / ".venv-peer",
        packages=(f"rumi-eo=={RUMI_EO_VERSION}",),
        probe="import importlib.metadata as m, rumi, geozl, openzl.ext; print(m.version('rumi-eo'))",
        expect=RUMI_EO_VERSION,
    )
