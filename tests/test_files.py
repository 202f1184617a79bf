"""rumi_core.files: files published whole, their temporaries where the caller keeps its work."""

from __future__ import annotations

import os
import re
import stat
from typing import TYPE_CHECKING

import pytest

from rumi_core.files import umask_mode, write_atomic

if TYPE_CHECKING:
    from pathlib import Path


def test_written_whole_with_the_umask_mode_and_no_temporary_left(tmp_path: Path) -> None:
    target = tmp_path / "blob.rumih"
    write_atomic(target, b"abc")
    write_atomic(target, b"defg")
    assert target.read_bytes() == b"defg"
    assert stat.S_IMODE(target.stat().st_mode) == umask_mode()
    assert [p.name for p in tmp_path.iterdir()] == ["blob.rumih"]


def test_the_temporary_is_made_in_temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process killed before the rename leaves its temporary in the work folder it owns, not beside the output."""
    work = tmp_path / ".staging"
    work.mkdir()
    renamed: list[str] = []
    replace = os.replace

    def recording(src: str, dst: str) -> None:
        renamed.append(src)
        assert [p.name for p in work.iterdir()] == [os.path.basename(src)]
        replace(src, dst)

    monkeypatch.setattr(os, "replace", recording)
    write_atomic(tmp_path / "manifest.jsonl", b"{}\n", temp_dir=work)
    assert [os.path.dirname(src) for src in renamed] == [str(work)]
    assert (tmp_path / "manifest.jsonl").read_bytes() == b"{}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".staging", "manifest.jsonl"]
    assert not list(work.iterdir())


def test_a_failed_write_removes_its_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()

    def refuse(src: str, dst: str) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="cross-device"):
        write_atomic(tmp_path / "out.bin", b"x", temp_dir=work)
    assert not list(work.iterdir())
    assert [p.name for p in tmp_path.iterdir()] == ["work"]


_PAST_THE_FILE_SIZE_LIMIT = """
import resource, sys
import numpy as np
import rumi_core
from rumi_core.files import write_atomic
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # Python ignores SIGXFSZ: a write past it is EFBIG
for label, call in (
    ("write_atomic", lambda: write_atomic(sys.argv[1] + "/doc.json", bytes(8192))),
    ("write", lambda: rumi_core.write(sys.argv[1] + "/big.rumi", np.random.default_rng(0).integers(0, 65535, (1, 64, 64), "uint16"),
                                      bands=["b"], times=["2020-01-01"], compression="portable")),
):
    try:
        call()
    except OSError as err:
        print(label, err.errno, err.filename)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="RLIMIT_FSIZE is POSIX")
def test_a_write_that_fails_for_want_of_room_names_the_file(tmp_path: Path) -> None:
    """ENOSPC, EFBIG and EIO of a write name no file ("[Errno 27] File too large" alone, from a run writing hundreds of
    files); the error names the file being made. Here a file-size limit stands in for a full disk."""
    import errno
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _PAST_THE_FILE_SIZE_LIMIT, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines() == [
        f"write_atomic {errno.EFBIG} {tmp_path}/doc.json",
        f"write {errno.EFBIG} {tmp_path}/big.rumi",
    ], done.stderr
    assert sorted(os.listdir(tmp_path)) == []  # nothing partial left


@pytest.mark.parametrize("how", ["write", "assemble", "atomic"])
def test_a_path_no_file_can_be_written_at_is_named_before_any_work(tmp_path: Path, how: str) -> None:
    """A missing folder, a folder and a URL are refused naming what the caller gave. Before, the error named a hidden
    temporary (``nodir/.x7ph2v.rumi.partial``), a folder's temporary went into its parent, and a URL became the
    local folders ``http:/host/``."""
    import numpy as np

    import rumi_core
    from rumi_core.assemble import FileAssembler
    from rumi_core.errors import InvalidInputError
    from rumi_core.files import atomic_file
    from rumi_core.writer import plan_write

    plan = plan_write((1, 16, 16), np.dtype("uint16"), bands=["a"], times=["2020-01-01"])

    def attempt(path: str | bytes) -> None:
        if how == "write":
            rumi_core.write(path, np.zeros((1, 16, 16), "uint16"), bands=["a"], times=["2020-01-01"])
        elif how == "assemble":
            FileAssembler(path, plan.layout, plan.georef, plan.trailer).abort()
        else:
            with atomic_file(path) as f:
                f.write(b"x")

    with pytest.raises(FileNotFoundError, match=re.escape(f"cannot write x.rumi in a folder that does not exist: '{tmp_path / 'nodir'}'")):
        attempt(str(tmp_path / "nodir" / "x.rumi"))
    with pytest.raises(IsADirectoryError, match=re.escape(f"is a folder, not a file to write: '{tmp_path}'")):
        attempt(str(tmp_path))
    with pytest.raises(InvalidInputError, match=re.escape("http://127.0.0.1:9/x.rumi is a URL, and files are written locally")):
        attempt("http://127.0.0.1:9/x.rumi")
    assert sorted(os.listdir(tmp_path)) == [] and not any(n.endswith(".partial") for n in os.listdir(tmp_path.parent))
    attempt(os.fsencode(tmp_path / "b.rumi"))  # a bytes path, as os takes one
    assert os.listdir(tmp_path) == ([] if how == "assemble" else ["b.rumi"])
