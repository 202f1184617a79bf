"""rumi_core.files: files published whole, their temporaries where the caller keeps its work."""

from __future__ import annotations

import os
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
