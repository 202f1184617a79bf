"""In the pipeline: the selected codec, the lossy bound and the STAC catalogue of a conversion."""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from click.testing import CliRunner

import rumi_core
from catalog import validate_stac
from pipelines.convert import run
from pipelines.errors import OptionError
from pipelines.jsonl import load_jsonl
from pipelines.options import ConvertOptions
from pipelines.testing import S2_BANDS, synthetic_cube, write_geotiff, write_series
from rumi_core.cli.main import cli
from rumi_core.codecs import codec_from_dict
from rumi_core.header import HeaderBlob
from rumi_core.writer import frame_samples

if TYPE_CHECKING:
    from pathlib import Path

DATES = ["2023-01-05", "2023-02-04", "2023-04-10"]


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray[Any, Any]]:
    """Three dates x four bands of 96 x 80 uint16 scenes: directory and ``(T, B, Y, X)`` data."""
    directory = tmp_path_factory.mktemp("publish-scenes")
    _, cube = write_series(str(directory), dates=DATES, size=(96, 80), seed=7)
    return directory, cube


def write_holed_series(directory: Path, cube: np.ndarray[Any, Any], holes: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Write ``cube`` as scenes like :func:`write_series`, with nodata (0) where ``holes``; return the written data."""
    holed = np.where(holes, 0, cube).astype(cube.dtype)
    directory.mkdir()
    for t, day in enumerate(DATES[: cube.shape[0]]):
        moment = dt.datetime.fromisoformat(day).replace(hour=10, minute=30, second=21)
        for b, token in enumerate(S2_BANDS[: cube.shape[1]]):
            write_geotiff(
                str(directory / f"S2_T32UPU_{moment:%Y%m%dT%H%M%S}_{token}.tif"),
                holed[t, b][np.newaxis],
                epsg=32632,
                transform=(10.0, 0.0, 600000.0, 0.0, -10.0, 5300040.0),
                nodata=0,
                tags={"TIFFTAG_DATETIME": f"{moment:%Y:%m:%d %H:%M:%S}"},
            )
    return holed


def _only_entry(out: Path) -> dict[str, Any]:
    (entry,) = load_jsonl(str(out / "manifest.jsonl"))
    return entry


def test_selected_codec_is_recorded_and_written(scenes: tuple[Path, np.ndarray[Any, Any]], tmp_path: Path) -> None:
    directory, cube = scenes
    out = tmp_path / "out"
    run([str(directory)], ConvertOptions(out=str(out), tile_size=48, write_catalog=False))
    entry = _only_entry(out)
    assert entry["codec"]["name"] != "raster" and entry["extra"] == {"mode": "lossless", "compression": "auto"}
    data = (out / entry["file"]).read_bytes()
    blob = HeaderBlob.from_bytes((out / entry["blob"]).read_bytes())
    assert np.array_equal(rumi_core.read(out / entry["file"], blob.to_bytes()), cube)
    # Every frame of the file is what the recorded codec writes for that frame's samples.
    codec = codec_from_dict(entry["codec"])
    for index in range(blob.layout.frame_count):
        offset, length = blob.frame_range(index)
        assert codec.encode(frame_samples(cube, blob.layout, index), axes=blob.layout.frame_axes) == data[offset : offset + length]
    assert not (out / "stac").exists()


def test_max_and_portable_modes(scenes: tuple[Path, np.ndarray[Any, Any]], tmp_path: Path) -> None:
    directory, cube = scenes
    for mode in ("max", "portable"):
        out = tmp_path / mode
        run([str(directory)], ConvertOptions(out=str(out), tile_size=48, compression=mode, write_catalog=False))
        entry = _only_entry(out)
        assert np.array_equal(rumi_core.read(out / entry["file"], (out / entry["blob"]).read_bytes()), cube)
        if mode == "portable":
            assert "geozl" not in json.dumps(entry["codec"])


@pytest.mark.parametrize("bound", [{"max_abs_error": 3.0}, {"max_rel_error": "2%"}])
def test_lossy_bound_holds_end_to_end(tmp_path: Path, bound: dict[str, Any]) -> None:
    cube = synthetic_cube(2, 4, 70, 90, seed=11, dtype="uint16")
    holes = np.zeros(cube.shape, dtype=bool)
    holes[..., 5:15, 10:40] = True
    holes[1, 2, 40:, 60:] = True
    src = tmp_path / "holed"
    holed = write_holed_series(src, cube, holes)
    out = tmp_path / "out"
    run([str(src)], ConvertOptions(out=str(out), tile_size=32, **bound))
    entry = _only_entry(out)
    assert entry["extra"] == {"mode": "lossy", "lossy_bound": bound, "compression": "auto"}
    assert entry["codec"]["name"] == "bounded"
    back = rumi_core.read(out / entry["file"], (out / entry["blob"]).read_bytes()).astype(np.float64)
    source = holed.astype(np.float64)
    assert np.array_equal(back[holes], source[holes])  # nodata exact
    error = np.abs(back - source)
    if "max_abs_error" in bound:
        assert error.max() <= 3.0
    else:
        assert np.all(error <= 0.02 * np.abs(source))
    assert not np.array_equal(back, source)  # it is lossy
    item = json.loads(next((out / "stac").rglob(f"{entry['cube_id']}.json")).read_text())
    assert json.dumps(bound["max_abs_error"] if "max_abs_error" in bound else bound["max_rel_error"]) in json.dumps(item["properties"])


def test_catalogue_validates_and_search_finds_the_cube(scenes: tuple[Path, np.ndarray[Any, Any]], tmp_path: Path) -> None:
    directory, _ = scenes
    out = tmp_path / "out"
    runner = CliRunner()
    done = runner.invoke(cli, ["convert", str(directory), "--out", str(out), "--tile-size", "48", "--no-progress"])
    assert done.exit_code == 0, done.output
    stac = out / "stac"
    assert f"catalogue: {stac}" in done.output
    assert (stac / "catalog.json").is_file() and (stac / "items.parquet").is_file()
    entry = _only_entry(out)
    docs = [json.loads(p.read_text()) for p in stac.rglob("*.json")]
    items = [d for d in docs if d.get("type") == "Feature"]
    assert [i["id"] for i in items] == [entry["cube_id"]]
    for doc in docs:
        validate_stac(doc)
    item = items[0]
    assert item["properties"]["start_datetime"].startswith("2023-01-05") and item["properties"]["end_datetime"].startswith("2023-04-10")
    minx, miny, maxx, maxy = item["bbox"]
    bbox = f"{minx + 1e-4},{miny + 1e-4},{maxx - 1e-4},{maxy - 1e-4}"
    found = runner.invoke(cli, ["search", str(stac), "--bbox", bbox, "--datetime", "2023-02-01/2023-03-01", "--json"])
    assert found.exit_code == 0, found.output
    assert [h["id"] for h in json.loads(found.output)] == [entry["cube_id"]]
    missed = runner.invoke(cli, ["search", str(stac), "--bbox", bbox, "--datetime", "2024-01-01/2024-12-31", "--json"])
    assert json.loads(missed.output) == []
    # A rerun (every cube skipped) replaces the catalogue in place; nothing is left beside it.
    again = runner.invoke(cli, ["convert", str(directory), "--out", str(out), "--tile-size", "48", "--no-progress"])
    assert again.exit_code == 0, again.output
    assert (stac / "catalog.json").is_file()
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [".stac.lock"]  # the catalogue's lock, empty


def test_catalogue_elsewhere(scenes: tuple[Path, np.ndarray[Any, Any]], tmp_path: Path) -> None:
    directory, _ = scenes
    out, stac = tmp_path / "out", tmp_path / "published" / "stac"
    run([str(directory)], ConvertOptions(out=str(out), tile_size=48, catalog=str(stac)))
    assert (stac / "catalog.json").is_file() and not (out / "stac").exists()
    import catalog

    (hit,) = catalog.search(stac)
    assert hit.id == _only_entry(out)["cube_id"] and hit.item_href is not None
    # The links survive the swap into place: the item found in the index opens and reads its file.
    with catalog.Cube.open(hit.item_href) as cube:
        got = cube.read(bands=[1], times=[2], window=((10, 60), (5, 70)))
    assert np.array_equal(got.as_cube(), scenes[1][2:3, 1:2, 10:60, 5:70])


def test_runs_into_one_shared_catalogue_add_to_it(tmp_path: Path) -> None:
    """``--out run1 --catalog stac``, then ``--out run2 --catalog stac``: the catalogue lists both runs' cubes.

    A run owns the files under its ``--out``: a re-run keeps the catalogue as it was, and a cube
    of its own ``--out`` that it no longer produces leaves the catalogue, as in a clean run.
    """
    import catalog

    first, _ = write_series(str(tmp_path / "a"), dates=DATES, size=(40, 48), seed=10)
    second, _ = write_series(str(tmp_path / "b"), dates=DATES, size=(40, 48), seed=11, origin=(700000.0, 5300040.0))
    stac = tmp_path / "stac"
    run(sorted(first), ConvertOptions(out=str(tmp_path / "run1"), tile_size=32, catalog=str(stac)))
    run(sorted(second), ConvertOptions(out=str(tmp_path / "run2"), tile_size=32, catalog=str(stac)))
    ids = sorted(h.id for h in catalog.search(stac))
    assert ids == sorted([_only_entry(tmp_path / "run1")["cube_id"], _only_entry(tmp_path / "run2")["cube_id"]])
    before = {p.relative_to(stac): p.read_bytes() for p in sorted(stac.rglob("*")) if p.is_file()}
    run(sorted(second), ConvertOptions(out=str(tmp_path / "run2"), tile_size=32, catalog=str(stac)))
    assert {p.relative_to(stac): p.read_bytes() for p in sorted(stac.rglob("*")) if p.is_file()} == before
    with catalog.Cube.open(next(h.item_href for h in catalog.search(stac) if h.id == ids[0])) as cube:  # the kept item still reads
        assert cube.read(bands=[0], times=[0]).data.shape == (1, 1, 40, 48)
    run(sorted(first)[:4], ConvertOptions(out=str(tmp_path / "run2"), tile_size=32, catalog=str(stac)))  # run2 now holds another cube
    assert len(catalog.search(stac)) == 2 and _only_entry(tmp_path / "run1")["cube_id"] in {h.id for h in catalog.search(stac)}


def test_a_broken_item_of_the_catalogue_added_to_fails_the_run_and_keeps_that_catalogue(tmp_path: Path) -> None:
    first, _ = write_series(str(tmp_path / "a"), dates=DATES, size=(40, 48), seed=10)
    second, _ = write_series(str(tmp_path / "b"), dates=DATES, size=(40, 48), seed=11, origin=(700000.0, 5300040.0))
    stac = tmp_path / "stac"
    run(sorted(first), ConvertOptions(out=str(tmp_path / "run1"), tile_size=32, catalog=str(stac)))
    (item,) = stac.rglob(f"{_only_entry(tmp_path / 'run1')['cube_id']}.json")
    item.write_text('{"type": "Feature", "id": "x", "assets": {"data": {"href": 5}}}')
    before = {p: p.read_bytes() for p in stac.rglob("*") if p.is_file()}
    result = CliRunner().invoke(
        cli, ["convert", *sorted(second), "--out", str(tmp_path / "run2"), "--catalog", str(stac), "--tile-size", "32"]
    )
    assert result.exit_code == 1, result.output
    assert (
        f"{item} is malformed: item 'x': assets.data.href is a number, not a text; it is in the catalogue this run adds to" in result.output
    )
    (error,) = [line for line in result.output.splitlines() if line.startswith("Error: ")]  # Beam's log, in-process, is above it
    assert "PipelineError" not in error and "while running" not in error and "in the step" not in error, error
    assert {p: p.read_bytes() for p in stac.rglob("*") if p.is_file()} == before and list((tmp_path / "run2").glob("*.rumi"))
    item.unlink()  # removed: the next run adds its cube to what is left
    run(sorted(second), ConvertOptions(out=str(tmp_path / "run2"), tile_size=32, catalog=str(stac)))
    import catalog

    assert [h.id for h in catalog.search(stac)] == [_only_entry(tmp_path / "run2")["cube_id"]]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_abs_error": 1, "max_rel_error": "1%"}, "--max-abs-error: give max_abs_error or max_rel_error, not both"),
        ({"max_rel_error": "one percent"}, "--max-rel-error"),
        ({"max_abs_error": -1.0}, "--max-abs-error"),
        ({"max_abs_error": 1, "compression": "openzl"}, "--compression"),
        ({"max_abs_error": 1, "compression": "portable"}, "--compression: portable frames cannot be lossy"),
    ],
)
def test_bad_bounds(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(OptionError) as err:
        ConvertOptions(out="/tmp/x", **kwargs)
    assert str(err.value).startswith(message)


def test_bound_options_are_canonical() -> None:
    assert ConvertOptions(out="/tmp/x", max_abs_error=0).error_bound is None
    assert ConvertOptions(out="/tmp/x", max_rel_error=" 0.5 %").max_rel_error == "0.5%"
    assert ConvertOptions(out="/tmp/x", max_abs_error=2).max_abs_error == 2.0


def test_rerun_with_another_mode_converts_again(scenes: tuple[Path, np.ndarray[Any, Any]], tmp_path: Path) -> None:
    """A file's name does not say lossless or lossy: a rerun asking for the other mode must not reuse it."""
    directory, cube = scenes
    out = tmp_path / "out"
    first = run([str(directory)], ConvertOptions(out=str(out), tile_size=48, write_catalog=False))
    assert [e.status for e in first.entries] == ["written"]
    again = run([str(directory)], ConvertOptions(out=str(out), tile_size=48, write_catalog=False))
    assert [e.status for e in again.entries] == ["skipped"]
    lossy = run([str(directory)], ConvertOptions(out=str(out), tile_size=48, write_catalog=False, max_abs_error=4.0))
    entry = _only_entry(out)
    assert [e.status for e in lossy.entries] == ["written"] and "status" not in entry
    assert entry["extra"] == {"mode": "lossy", "lossy_bound": {"max_abs_error": 4.0}, "compression": "auto"}
    back = rumi_core.read(out / entry["file"], (out / entry["blob"]).read_bytes()).astype(np.float64)
    assert np.abs(back - cube.astype(np.float64)).max() <= 4.0
    back_to_lossless = run([str(directory)], ConvertOptions(out=str(out), tile_size=48, write_catalog=False))
    entry = _only_entry(out)
    assert [e.status for e in back_to_lossless.entries] == ["written"] and entry["extra"] == {"mode": "lossless", "compression": "auto"}
    assert np.array_equal(rumi_core.read(out / entry["file"], (out / entry["blob"]).read_bytes()), cube)


def test_frame_unit_auto_is_measured(scenes: tuple[Path, np.ndarray[Any, Any]], tmp_path: Path) -> None:
    """``--frame-unit auto --access any`` measures the units valid for (B, T) and keeps the smallest."""
    import rumi_core.compression

    directory, cube = scenes
    out = tmp_path / "out"
    run([str(directory)], ConvertOptions(out=str(out), tile_size=48, frame_unit="auto", access=None, write_catalog=False))
    entry = _only_entry(out)
    blob = (out / entry["file"]).with_suffix(".rumih").read_bytes()
    assert np.array_equal(rumi_core.read(out / entry["file"], blob), cube)
    expected = rumi_core.compression.select_layout(cube, tile_size=(48, 48), frame_unit="auto").frame_unit
    assert entry["frame_unit"] == expected == HeaderBlob.from_bytes(blob).layout.frame_unit
    # Explicit units are kept as given.
    run([str(directory)], ConvertOptions(out=str(tmp_path / "fixed"), tile_size=48, frame_unit=4, write_catalog=False))
    assert _only_entry(tmp_path / "fixed")["frame_unit"] == 4


def test_access_tile_keeps_one_band_and_date_per_frame(scenes: tuple[Path, np.ndarray[Any, Any]], tmp_path: Path) -> None:
    """``--access tile`` (the default) overrides the size-based choice: a frame is the smallest thing a reader decodes."""
    directory, cube = scenes
    out = tmp_path / "out"
    done = CliRunner().invoke(
        cli, ["convert", str(directory), "--out", str(out), "--tile-size", "48", "--access", "tile", "--no-catalog", "--no-progress"]
    )
    assert done.exit_code == 0, done.output
    entry = _only_entry(out)
    assert entry["frame_unit"] in {0, 9}
    assert entry["frames"] == 2 * 2 * cube.shape[0] * cube.shape[1]  # 2 x 2 tile locations, one frame per band and date
    bad = CliRunner().invoke(cli, ["convert", str(directory), "--out", str(out), "--access", "pixel"])
    assert bad.exit_code == 2 and "tile" in bad.output
    args = ["convert", str(directory), "--out", str(tmp_path / "cells"), "--tile-size", "48", "--access", "cell", "--no-catalog"]
    cells = CliRunner().invoke(cli, [*args, "--no-progress"])
    assert cells.exit_code == 0, cells.output
    assert _only_entry(tmp_path / "cells")["frame_unit"] in {3, 4, 5, 6, 7, 8}


def test_license_is_stated_on_the_items_and_on_each_collection_whose_items_agree(tmp_path: Path, stac_schemas: Path) -> None:
    """Without a licence a collection says "other" with no link, which STAC reads as "private, no rights granted"."""
    import pystac

    first, _ = write_series(str(tmp_path / "a"), dates=DATES, size=(40, 48), seed=10)
    second, _ = write_series(str(tmp_path / "b"), dates=DATES, size=(40, 48), seed=11, origin=(700000.0, 5300040.0))
    stac = tmp_path / "stac"
    args = ["--catalog", str(stac), "--tile-size", "32", "--no-progress"]
    result = CliRunner().invoke(cli, ["convert", *sorted(first), "--out", str(tmp_path / "run1"), "--license", "CC-BY-4.0", *args])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(cli, ["convert", *sorted(second), "--out", str(tmp_path / "run2"), *args])  # none stated
    assert result.exit_code == 0, result.output
    licensed = _only_entry(tmp_path / "run1")["cube_id"]
    for collection in pystac.Catalog.from_file(str(stac / "catalog.json")).get_children():
        assert isinstance(collection, pystac.Collection)
        (item,) = collection.get_items()
        links = [link.href for link in collection.links if link.rel == "license"]
        if item.id == licensed:
            assert item.properties["license"] == collection.license == "CC-BY-4.0"
            assert links == ["https://spdx.org/licenses/CC-BY-4.0.html"]
        else:
            assert "license" not in item.properties and collection.license == "other" and links == []
        assert validate_stac(collection, schema_dir=str(stac_schemas), require_all=True).unchecked == ()
        assert validate_stac(item, schema_dir=str(stac_schemas), require_all=True).unchecked == ()
    refused = CliRunner().invoke(cli, ["convert", *sorted(first), "--out", str(tmp_path / "run3"), "--license", "CC BY 4.0"])
    assert refused.exit_code == 2 and "--license: expected an SPDX license identifier such as CC-BY-4.0, or other" in refused.output


def test_a_band_with_a_colour_palette_is_catalogued_as_classes(tmp_path: Path) -> None:
    """A land-cover GeoTIFF's palette band holds class indices: its item says so (``rumi:categorical``), the item validates
    offline, and ``catalog.load`` refuses to blend it."""
    import rasterio

    import catalog
    from catalog.errors import LoadError

    directory = tmp_path / "in"
    directory.mkdir()
    classes = np.random.default_rng(1).integers(1, 6, size=(1, 40, 48), dtype=np.uint8)
    path = write_geotiff(
        str(directory / "landcover.tif"), classes, epsg=32633, transform=(10, 0, 500000, 0, -10, 4000000), nodata=0,
        tags={"TIFFTAG_DATETIME": "2023:01:05 10:00:00"},
    )  # fmt: skip
    with rasterio.open(path, "r+") as ds:
        ds.write_colormap(1, {i: (40 * i, 255 - 40 * i, 0, 255) for i in range(6)})
    run([str(directory)], ConvertOptions(out=str(tmp_path / "out"), tile_size=32, write_catalog=True))
    (item_path,) = (tmp_path / "out" / "stac").glob("*/*/*.json")
    item = json.loads(item_path.read_text())
    assert item["assets"]["data"]["bands"][0]["rumi:categorical"] is True
    validate_stac(item)
    with pytest.raises(LoadError, match="holds classes"):
        catalog.load([str(item_path)], crs="EPSG:32633", resolution=15, resampling="bilinear")
    np.testing.assert_array_equal(catalog.load([str(item_path)]).data.values[0], classes)
