"""FileAssembler: a file from pre-compressed frames, with or without the byte counts known up front."""

from __future__ import annotations

import errno
import hashlib
import importlib
import os
from typing import TYPE_CHECKING

import numpy as np
import pytest

import rumi_core
from rumi_core.assemble import FileAssembler
from rumi_core.codecs import parse_codec
from rumi_core.encodings import encoding_for_dtype
from rumi_core.errors import InvalidInputError
from rumi_core.georef import Georeferencing
from rumi_core.layout import Layout
from rumi_core.time_coordinates import TimeCoordinates
from rumi_core.trailer import Trailer
from rumi_core.writer import frame_samples

if TYPE_CHECKING:
    from pathlib import Path

LAYOUT = Layout(20, 18, 3, 2, 8, 8, encoding_for_dtype("uint16"), 0)
TRAILER = Trailer(("red", "nir"), TimeCoordinates.from_values(["2020-01-01", "2020-02-01", "2020-03-01"]))


def _cube() -> np.ndarray:
    rng = np.random.default_rng(3)
    return rng.integers(0, 4000, size=(3, 2, 18, 20), dtype="uint16")


def _frames(cube: np.ndarray) -> list[bytes]:
    codec = parse_codec(None)
    return [codec.encode(frame_samples(cube, LAYOUT, i), axes=LAYOUT.frame_axes) for i in range(LAYOUT.frame_count)]


def _write(path: Path, frames: list[bytes], counts: list[int] | None) -> FileAssembler:
    with FileAssembler(path, LAYOUT, Georeferencing.undefined(), TRAILER, counts=counts) as out:
        for frame in frames:
            out.write_frame(frame)
    return out


def test_known_counts_write_the_same_file_and_hash_it_on_the_way(tmp_path: Path) -> None:
    cube = _cube()
    frames = _frames(cube)
    late = _write(tmp_path / "late.rumi", frames, None)
    early = _write(tmp_path / "early.rumi", frames, [len(f) for f in frames])
    assert (tmp_path / "early.rumi").read_bytes() == (tmp_path / "late.rumi").read_bytes()
    assert early.header == late.header
    assert early.sha256 == hashlib.sha256((tmp_path / "early.rumi").read_bytes()).hexdigest()
    assert late.sha256 is None  # the head went in last: nothing hashed the file in order
    assert early.header is not None
    np.testing.assert_array_equal(rumi_core.read(tmp_path / "early.rumi", early.header), cube)


def test_a_frame_of_another_size_than_announced_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    frames = _frames(_cube())
    counts = [len(f) for f in frames]
    counts[5] += 1
    with pytest.raises(InvalidInputError, match=r"frame 5 is \d+ bytes, announced as \d+") as info:
        _write(tmp_path / "f.rumi", frames, counts)
    assert info.value.field == "TileByteCounts"
    assert list(tmp_path.iterdir()) == []


def test_counts_for_another_number_of_frames_are_refused_before_any_file_exists(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"^53 byte counts for 54 frames"):
        FileAssembler(tmp_path / "f.rumi", LAYOUT, Georeferencing.undefined(), TRAILER, counts=[1] * 53)
    assert list(tmp_path.iterdir()) == []


def _copy(path: Path, folder: Path, frames: list[bytes], counts: list[int] | None) -> FileAssembler:
    """Copy ``frames`` into a file from one source file, where each lies after a gap of its own length, last first."""
    folder.mkdir(exist_ok=True)
    offsets = {}
    with open(folder / "frames", "wb") as source:
        for i in reversed(range(len(frames))):
            source.write(bytes(i % 7))
            offsets[i] = source.tell()
            source.write(frames[i])
    with open(folder / "frames", "rb") as source, FileAssembler(path, LAYOUT, Georeferencing.undefined(), TRAILER, counts=counts) as out:
        for i, frame in enumerate(frames):
            out.copy_frame(source.fileno(), offsets[i], len(frame))
    return out


@pytest.mark.parametrize("batch", [1, 60, 1 << 20], ids=["every frame beyond a batch", "batches of a few frames", "one batch"])
def test_a_hashed_file_is_the_same_whatever_its_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int) -> None:
    """Frames written and copied in turn, gathered in batches smaller than a frame, of a few frames, or of all: one file, one hash."""
    monkeypatch.setattr(importlib.import_module("rumi_core.assemble"), "_BATCH_BYTES", batch)  # the package's `assemble` is the function
    cube = _cube()
    frames = _frames(cube)
    expected = _write(tmp_path / "written.rumi", frames, None)
    (tmp_path / "frames").write_bytes(b"".join(frames))
    starts = np.cumsum([0, *(len(f) for f in frames)]).tolist()
    with (
        open(tmp_path / "frames", "rb") as source,
        FileAssembler(tmp_path / "mixed.rumi", LAYOUT, Georeferencing.undefined(), TRAILER, counts=[len(f) for f in frames]) as out,
    ):
        for i, frame in enumerate(frames):
            if i % 3:
                out.copy_frame(source.fileno(), starts[i], len(frame))
            else:
                out.write_frame(frame)
    data = (tmp_path / "mixed.rumi").read_bytes()
    assert data == (tmp_path / "written.rumi").read_bytes()
    assert out.header == expected.header
    assert out.sha256 == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("known", [True, False], ids=["counts-known", "counts-late"])
def test_frames_copied_from_files_make_the_same_file(tmp_path: Path, known: bool) -> None:
    cube = _cube()
    frames = _frames(cube)
    written = _write(tmp_path / "written.rumi", frames, None)
    copied = _copy(tmp_path / "copied.rumi", tmp_path / "parts", frames, [len(f) for f in frames] if known else None)
    assert (tmp_path / "copied.rumi").read_bytes() == (tmp_path / "written.rumi").read_bytes()
    assert copied.header == written.header
    assert copied.sha256 == (hashlib.sha256((tmp_path / "copied.rumi").read_bytes()).hexdigest() if known else None)


@pytest.mark.parametrize("known", [True, False], ids=["counts-known", "counts-late"])
def test_a_frame_file_the_kernel_cannot_copy_is_written_through_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, known: bool
) -> None:
    """copy_file_range fails between some file systems (EXDEV) and on old kernels (ENOSYS).

    A hashed file (counts known) never asks the kernel to copy: each frame is read once, to be hashed, and written from there.
    """
    frames = _frames(_cube())
    expected = _write(tmp_path / "written.rumi", frames, [len(f) for f in frames])
    refused = []

    def refuse(*args: object) -> int:
        refused.append(args)
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", refuse)
    copied = _copy(tmp_path / "copied.rumi", tmp_path / "parts", frames, [len(f) for f in frames] if known else None)
    assert (tmp_path / "copied.rumi").read_bytes() == (tmp_path / "written.rumi").read_bytes()
    assert copied.header == expected.header
    assert copied.sha256 == (expected.sha256 if known else None)
    assert len(refused) == (0 if known else len(frames))


def test_a_frame_file_of_another_size_than_announced_is_refused(tmp_path: Path) -> None:
    frames = _frames(_cube())
    counts = [len(f) for f in frames]
    frames[2] = frames[2] + b"\0"
    with pytest.raises(InvalidInputError, match=r"frame 2 is \d+ bytes, announced as \d+"):
        _copy(tmp_path / "f.rumi", tmp_path / "parts", frames, counts)
    assert not (tmp_path / "f.rumi").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["parts"]


@pytest.mark.parametrize("known", [True, False], ids=["counts-known", "counts-late"])
def test_a_source_that_ends_before_the_frame_is_refused(tmp_path: Path, known: bool) -> None:
    frames = _frames(_cube())
    (tmp_path / "short").write_bytes(frames[0][:-3])
    counts = [len(f) for f in frames] if known else None
    with (
        pytest.raises(InvalidInputError, match=r"source ended 3 bytes early"),
        open(tmp_path / "short", "rb") as source,
        FileAssembler(tmp_path / "f.rumi", LAYOUT, Georeferencing.undefined(), TRAILER, counts=counts) as out,
    ):
        out.copy_frame(source.fileno(), 0, len(frames[0]))
    assert [p.name for p in tmp_path.iterdir()] == ["short"]


def _content_checksum_only(samples: np.ndarray) -> bytes:
    """An OpenZL frame of ``samples`` stored raw, with a content checksum and no compressed checksum."""
    import openzl.ext as zl

    compressor = zl.Compressor()
    compressor.select_starting_graph(zl.graphs.Store()(compressor))
    cctx = zl.CCtx()
    cctx.ref_compressor(compressor)
    cctx.set_parameter(zl.CParam.FormatVersion, 21)
    cctx.set_parameter(zl.CParam.ContentChecksum, 1)  # ZL_TernaryParam_enable
    cctx.set_parameter(zl.CParam.CompressedChecksum, 2)  # ZL_TernaryParam_disable
    return bytes(cctx.compress([zl.Input(zl.Type.Numeric, np.ascontiguousarray(samples).reshape(-1))]))


def test_a_frame_whose_samples_differ_from_its_content_checksum_names_that_and_verify_false(tmp_path: Path) -> None:
    """An encoder that changes samples after checksumming them (geozl 0.18's NaN stage, in rumi-eo's files) writes
    frames that decode to other samples than checksummed: the error says so, not that the blob is another file's."""
    cube = _cube()
    frames = [bytearray(_content_checksum_only(frame_samples(cube, LAYOUT, i))) for i in range(LAYOUT.frame_count)]
    first = frame_samples(cube, LAYOUT, 0).tobytes()
    frames[0][bytes(frames[0]).find(first) + 10] ^= 1  # one stored sample changed after checksumming
    blob = rumi_core.assemble(tmp_path / "c.rumi", layout=LAYOUT, georef=Georeferencing.undefined(), trailer=TRAILER, frames=frames)
    with pytest.raises(rumi_core.FrameDecodeError) as caught:
        rumi_core.read(tmp_path / "c.rumi", blob)
    message = str(caught.value)
    assert "not to the samples its writer checksummed" in message and "verify=False" in message
    assert "describes another file" not in message
    changed = rumi_core.read(tmp_path / "c.rumi", blob, verify=False)
    assert (changed != cube).sum() == 1
