"""Installing into a virtual environment (``rumi_core/testing/_install.py``): uv given pip's configuration, or pip.

The Makefile installs the project this way, and the peer environments
(rumi-eo, Airflow) are built this way. The project's wheel is checked for
what an installed copy needs beyond its modules: the PEP 561 markers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rumi_core.testing._install import bundled_uv, install_command, main, uv_arguments

# pip reads no configuration file when PIP_CONFIG_FILE is os.devnull, so these tests see only the variables they set.
_CLEAN = {"PIP_CONFIG_FILE": "/dev/null"}


@pytest.fixture
def pip_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """This process's environment without any pip configuration."""
    for name in [n for n in os.environ if n.startswith("PIP_") or n == "SSL_CERT_FILE"]:
        monkeypatch.delenv(name)
    for name, value in _CLEAN.items():
        monkeypatch.setenv(name, value)
    return monkeypatch


def test_where_pip_installs_from_is_carried_over(pip_env: pytest.MonkeyPatch) -> None:
    pip_env.setenv("PIP_INDEX_URL", "file:///srv/simple")
    pip_env.setenv("PIP_EXTRA_INDEX_URL", "file:///a/simple file:///b/simple")
    pip_env.setenv("PIP_FIND_LINKS", "/wheels")
    pip_env.setenv("PIP_CONSTRAINT", "/etc/constraints.txt")
    pip_env.setenv("PIP_CERT", "/etc/ca.pem")
    pip_env.setenv("PIP_DEFAULT_TIMEOUT", "60")
    carried = uv_arguments(sys.executable)
    assert carried is not None
    options, env = carried
    assert options == [
        "--index-url", "file:///srv/simple",
        "--extra-index-url", "file:///a/simple", "--extra-index-url", "file:///b/simple",
        "--find-links", "/wheels",
        "--constraint", "/etc/constraints.txt",
    ]  # fmt: skip
    assert env == {"SSL_CERT_FILE": "/etc/ca.pem"}


def test_an_option_that_changes_the_choice_and_is_not_carried_over_means_pip(pip_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pip_env.setenv("PIP_PRE", "1")  # pre-releases: uv spells it otherwise
    assert uv_arguments(sys.executable) is None
    uv = tmp_path / "uv"
    uv.touch()
    command, env = install_command(sys.executable, ["numpy"], uv)
    assert command[:4] == [sys.executable, "-m", "pip", "install"] and command[-1] == "numpy" and env == {}


def _wheel(directory: Path) -> Path:
    """A pure-Python wheel of one module, ``rumi_install_probe``, with no dependencies."""
    dist = "rumi_install_probe-1.0.dist-info"
    path = directory / "rumi_install_probe-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("rumi_install_probe.py", "VALUE = 42\n")
        wheel.writestr(f"{dist}/METADATA", "Metadata-Version: 2.1\nName: rumi-install-probe\nVersion: 1.0\n")
        wheel.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{dist}/RECORD", f"rumi_install_probe.py,,\n{dist}/METADATA,,\n{dist}/WHEEL,,\n{dist}/RECORD,,\n")
    return path


def _probe(python: Path) -> str:
    """What the probe wheel's module holds, imported in ``python``."""
    probe = "import rumi_install_probe as m; print(m.VALUE)"
    return subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_a_wheel_installs_and_imports(installer: str, pip_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    uv = bundled_uv() if installer == "uv" else None
    if installer == "uv" and uv is None:
        pytest.skip(f"no uv beside {sys.executable} (make install puts it there)")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    command, env = install_command(python, [str(_wheel(tmp_path))], uv)
    assert Path(command[0]).name == ("uv" if installer == "uv" else "python")
    subprocess.run(command, env={**os.environ, **env}, check=True)
    assert _probe(python) == "42"


def test_without_uv_the_script_installs_with_pip(pip_env: pytest.MonkeyPatch, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    pip_env.setenv("PIP_NO_INDEX", "1")  # no index to install uv from
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    assert main([str(python), str(_wheel(tmp_path))]) == 0
    assert "installing with pip" in capfd.readouterr().err
    assert not (venv / "bin" / "uv").exists()
    assert _probe(python) == "42"


def test_the_wheel_ships_py_typed_in_every_package(tmp_path: Path) -> None:
    """Each package of the wheel carries its PEP 561 marker, so type checkers read its types once installed.

    The wheel is built as ``make install`` builds the project (pip, with the build backend from the configured index).
    """
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(root)], check=True)
    (wheel,) = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as built:
        names = set(built.namelist())
    assert [p for p in ("rumi_core", "catalog", "pipelines") if f"{p}/py.typed" not in names] == []
