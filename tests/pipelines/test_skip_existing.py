"""How SkipExisting finds what an earlier run recorded of a file (``assemble_files._previous_entry``).

Each cube it checks looks its file up in the manifest: scanning the file for each
cube read N lines N times, so a re-run over thousands of cubes spent minutes
there. The manifest is now read once per version of it, and a rewritten one is
read again.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from pipelines.options import ConvertOptions
from pipelines.transforms import assemble_files

if TYPE_CHECKING:
    from pathlib import Path


def _write(path: str, lines: list[dict[str, str]]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)
    os.replace(tmp, path)  # a new file, as the manifest writer makes one


def test_the_manifest_is_read_once_per_version(tmp_path: Path) -> None:
    options = ConvertOptions(out=str(tmp_path))
    lines = [{"cube_id": f"c{i}", "sha256": f"{i:064x}", "codec": "x"} for i in range(50)]
    _write(options.manifest_path, lines)
    assemble_files._lines_by_file.cache_clear()
    for i in range(50):
        assert assemble_files._previous_entry(options, f"c{i}", f"{i:064x}") == lines[i]
    assert assemble_files._previous_entry(options, "c1", "0" * 64) is None  # another file of that cube
    assert assemble_files._lines_by_file.cache_info().misses == 1
    _write(options.manifest_path, [{**lines[0], "codec": "y"}])
    assert assemble_files._previous_entry(options, "c0", f"{0:064x}") == {**lines[0], "codec": "y"}
    assert assemble_files._previous_entry(options, "c1", f"{1:064x}") is None


def test_a_cube_written_with_another_compression_is_written_again(tmp_path: Path) -> None:
    """The same command gives the same bytes whatever an earlier run asked: a file written with ``--compression raster``
    is not kept by a default run (it was, being valid and lossless), and a second default run skips it."""
    import hashlib

    from pipelines.convert import run
    from pipelines.testing import write_series

    paths, _ = write_series(str(tmp_path / "scenes"), dates=["2023-01-05", "2023-02-04"], size=(48, 64), seed=2)
    fresh, reused = tmp_path / "fresh", tmp_path / "reused"
    common = {"tile_size": 32, "frame_unit": 0, "write_catalog": False}
    (clean,) = run(sorted(paths), ConvertOptions(out=str(fresh), **common)).entries  # type: ignore[arg-type]
    run(sorted(paths), ConvertOptions(out=str(reused), compression="raster", **common))  # type: ignore[arg-type]
    for status in ("written", "skipped"):
        (entry,) = run(sorted(paths), ConvertOptions(out=str(reused), **common)).entries  # type: ignore[arg-type]
        assert entry.status == status and entry.extra["compression"] == "auto"
        for name in (entry.file, entry.blob, "manifest.jsonl"):
            assert hashlib.sha256((reused / name).read_bytes()).digest() == hashlib.sha256((fresh / name).read_bytes()).digest(), name
    assert clean.codec == entry.codec


def test_a_rerun_that_changes_nothing_leaves_every_file_untouched(tmp_path: Path) -> None:
    """The manifest, the dead letters and the catalogue were rewritten with the same bytes and new times, so a folder
    synchronised by modification time (rsync) sent them all again after every nightly run that found nothing new."""
    from pipelines.convert import run
    from pipelines.testing import write_series

    write_series(str(tmp_path / "in"), dates=["2023-01-05", "2023-02-04"], size=(40, 56), seed=3)
    (tmp_path / "in" / "broken_B04.tif").write_bytes(b"not a tiff")
    options = ConvertOptions(out=str(tmp_path / "out"), tile_size=32, frame_unit=0, compression="raster")

    def times() -> dict[str, int]:
        out = tmp_path / "out"
        return {str(p.relative_to(out)): p.stat().st_mtime_ns for p in sorted(out.rglob("*")) if p.is_file()}

    first = run([str(tmp_path / "in")], options)
    assert first.dead_letters and [e.status for e in first.entries] == ["written"]
    before = times()
    assert {"manifest.jsonl", "dead-letter.jsonl", "stac/catalog.json"} <= before.keys()
    again = run([str(tmp_path / "in")], options)
    assert [e.status for e in again.entries] == ["skipped"]
    assert times() == before


def test_a_series_whose_middle_time_is_restated_is_written_again(tmp_path: Path) -> None:
    """A cube named by its first and last time and its inputs keeps its name when a middle scene's date tag is corrected.

    Its file then holds a time its plan lacks: the cube is converted again with the new time, never refused as one that
    would lose an acquisition (only a product's cube, named by its period, can be planned without some of its own).
    """
    import numpy as np
    import rasterio

    from pipelines.convert import run
    from pipelines.testing import write_geotiff

    stamps = {"a": "2024:05:01 10:00:00", "b": "2024:05:02 10:00:00", "c": "2024:05:03 10:00:00"}
    for name, stamp in stamps.items():
        data = np.full((1, 40, 56), ord(name), np.uint16)
        write_geotiff(str(tmp_path / f"{name}.tif"), data, epsg=32633, transform=(10, 0, 0, 0, -10, 400), tags={"TIFFTAG_DATETIME": stamp})
    options = ConvertOptions(out=str(tmp_path / "out"), tile_size=32, write_catalog=False)
    (first,) = run([str(tmp_path)], options).entries
    with rasterio.open(tmp_path / "b.tif", "r+") as ds:
        ds.update_tags(TIFFTAG_DATETIME="2024:05:02 10:30:00")
    again = run([str(tmp_path)], options)
    assert not again.dead_letters
    (entry,) = again.entries
    assert (entry.cube_id, entry.status) == (first.cube_id, "written")
    assert entry.times == ("2024-05-01T10:00:00Z", "2024-05-02T10:30:00Z", "2024-05-03T10:00:00Z")


def test_a_scene_rewritten_in_place_is_converted_again(tmp_path: Path) -> None:
    """A corrected scene delivered under its old name was skipped: the cube's name hashes its inputs' names, the file
    validated, and the cube kept the old pixels while the manifest stated the new input size. A re-run now compares each
    input's version (a local file's size and modification time) with the one the manifest recorded."""
    import numpy as np
    import rasterio

    from pipelines.convert import run
    from pipelines.testing import write_series

    paths, cube = write_series(str(tmp_path / "in"), dates=["2024-05-01", "2024-05-06"], size=(40, 56), seed=5)
    options = ConvertOptions(out=str(tmp_path / "out"), tile_size=32, frame_unit=0, compression="raster", write_catalog=False)
    (first,) = run(sorted(paths), options).entries
    (unchanged,) = run(sorted(paths), options).entries
    assert unchanged.status == "skipped"

    corrected = sorted(p for p in paths if "20240506" in os.path.basename(p))[0]
    with rasterio.open(corrected, "r+") as ds:  # same size, same name, other pixels
        band = ds.read(1)
        ds.write(band // 2 + 1, 1)
    (again,) = run(sorted(paths), options).entries
    assert (again.cube_id, again.status) == (first.cube_id, "written")
    with rasterio.open(corrected) as ds:
        fresh = ds.read(1)
    import rumi_core

    with rumi_core.open(tmp_path / "out" / again.file) as out:
        assert not np.array_equal(out.read(times=[1]), cube[[1]])
        assert any(np.array_equal(out.read(times=[1])[0, b], fresh) for b in range(out.count))
    (settled,) = run(sorted(paths), options).entries
    assert settled.status == "skipped"
