"""``rumi read`` (items, URLs, names, ranges, bbox, GeoTIFF) and ``rumi export``, through CliRunner."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import rasterio
from click.testing import CliRunner

import rumi_core
from catalog.collections import build_catalog
from catalog.items import create_item
from rumi_core.cli.main import cli
from rumi_core.encodings import ENCODINGS

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from catalog.testing import RangeRequestServer


def test_commands_are_registered() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in ("read", "search", "export"):
        assert name in result.output
    assert "--bbox-crs" in CliRunner().invoke(cli, ["read", "--help"]).output


def test_http_retries_are_shown_only_with_verbose(monkeypatch: pytest.MonkeyPatch) -> None:
    """The catalogue's logging hook (entry point ``rumi.logging``) hides urllib3's retry warnings unless ``-v`` is given."""
    import logging

    urllib3_logger = logging.getLogger("urllib3")
    monkeypatch.setattr(urllib3_logger, "level", logging.NOTSET)
    assert CliRunner().invoke(cli, ["-v", "header", "--help"]).exit_code == 0
    assert urllib3_logger.level == logging.NOTSET
    assert CliRunner().invoke(cli, ["header", "--help"]).exit_code == 0
    assert urllib3_logger.level == logging.ERROR


def test_read_item_over_http_by_names_to_npy(cube: Any, server: RangeRequestServer, tmp_path: Path) -> None:
    item = create_item(cube.path, cube.blob_path, data_href="cube.rumi", header_href="cube.rumih", thumbnail=False)
    (tmp_path / "item.json").write_text(json.dumps(item.to_dict(include_self_link=False)))
    out = tmp_path / "out.npy"
    args = [
        "read",
        server.url("item.json"),
        "--bands",
        "nir,red",
        "--times",
        "2021-01-10/2021-01-31",
        "--window",
        "0:64,48:96",
        "-o",
        str(out),
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(np.load(out), cube.data[1:3][:, [3, 2], 0:64, 48:96])
    assert server.requests("cube.rumi") == 2  # one tile location, two bands x two times in one run each


def test_read_bbox_to_geotiff_keeps_crs_transform_and_descriptions(cube: Any, tmp_path: Path) -> None:
    out = tmp_path / "out.tif"
    args = ["read", str(cube.path), "--bands", "red", "--times", "0,2", "--bbox", "500100,3999500,500200,3999900",
            "--bbox-crs", "EPSG:32633", "-o", str(out)]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    with rasterio.open(out) as ds:
        assert ds.crs.to_epsg() == 32633
        assert tuple(ds.transform)[:6] == (10.0, 0.0, 500100.0, 0.0, -10.0, 3999900.0)
        assert ds.descriptions == ("B4, Red, 665nm @ 2021-01-01T00:00:00Z", "B4, Red, 665nm @ 2021-01-21T10:30:00Z")
        np.testing.assert_array_equal(ds.read(), cube.data[[0, 2], 2, 10:50, 10:20])
        assert ds.tags(1)["TIME"] == "2021-01-01T00:00:00Z"


def test_read_gs_url(cube: Any, gcs_upload: Callable[[Path, str], str], tmp_path: Path) -> None:
    url = gcs_upload(cube.path, f"{tmp_path.name}/cli.rumi")
    gcs_upload(cube.blob_path, f"{tmp_path.name}/cli.rumih")
    out = tmp_path / "g.npy"
    result = CliRunner().invoke(cli, ["read", url, "--bands", "0,3", "--times", "1", "-o", str(out)])
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(np.load(out), cube.data[[1]][:, [0, 3]])


def test_read_errors_are_clean(cube: Any, tmp_path: Path) -> None:
    runner = CliRunner()
    bad = runner.invoke(cli, ["read", str(cube.path), "--bands", "swir", "-o", str(tmp_path / "x.npy")])
    assert bad.exit_code == 1 and "no band is called 'swir'" in bad.output and "Traceback" not in bad.output
    both = runner.invoke(cli, ["read", str(cube.path), "--bbox", "1,2,3,4", "--window", "0:1,0:1", "-o", str(tmp_path / "x.npy")])
    assert both.exit_code == 2 and "not both" in both.output
    suffix = runner.invoke(cli, ["read", str(cube.path), "-o", str(tmp_path / "x.png")])
    assert suffix.exit_code == 2 and ".npy or .tif" in suffix.output
    missing = runner.invoke(cli, ["read", "http://127.0.0.1:9/none.rumi", "-o", str(tmp_path / "x.npy")])
    assert missing.exit_code == 1 and "none.rumih" in missing.output
    # A damaged local .rumi is judged as a rumi file, not parsed as a STAC item's JSON.
    (tmp_path / "empty.rumi").write_bytes(b"")
    empty = runner.invoke(cli, ["read", str(tmp_path / "empty.rumi"), "-o", str(tmp_path / "x.npy")])
    assert empty.exit_code == 1 and "the file is 0 bytes, shorter than the 292-byte header" in empty.output
    assert "JSON" not in empty.output


@pytest.mark.parametrize("command", ["read", "export", "search", "catalog", "info", "header", "validate"])
def test_a_failure_shows_no_password_or_signature_of_its_url(command: str, server: RangeRequestServer, tmp_path: Path) -> None:
    """The error line names the URL once, without its password and signing parameters: it goes to terminals and CI logs.
    rumi_core's commands show it through the catalogue's redaction too (entry point rumi.redact)."""
    url = server.url("none.rumi").replace("://", "://alice:s3cr3t@") + "?X-Goog-Credential=svc&X-Goog-Signature=deadbeef&v=2"
    out = ["-o", str(tmp_path / ("x.tif" if command == "export" else "x.npy"))]
    args = {
        "search": ["search", url.replace("none.rumi", "stac/catalog.json")],
        "catalog": ["read", "--catalog", url.replace("none.rumi", "stac/catalog.json"), "--bbox", "10,50,11,51", *out],
        "header": ["header", url, "-o", str(tmp_path / "x.rumih")],
    }.get(command, [command, url, *out] if command in ("read", "export") else [command, url])
    result = CliRunner().invoke(cli, args)
    assert result.exit_code in (1, 2) and "(HTTP 404)" in result.output, result.output
    assert "s3cr3t" not in result.output and "deadbeef" not in result.output and "X-Goog" not in result.output
    assert result.output.count("://alice@") == 1 and "?v=2" in result.output, result.output


def test_timeout_does_not_touch_local_files(cube: Any, tmp_path: Path) -> None:
    """Local files do not wait, as --timeout's help says: a budget used up before the read does not fail it."""
    item = create_item(cube.path, cube.blob_path, thumbnail=False)
    (tmp_path / "item.json").write_text(json.dumps(item.to_dict(include_self_link=False)))
    for command, out in (("read", "x.npy"), ("export", "x.tif")):
        args = [command, str(tmp_path / "item.json"), "--timeout", "0.000001", "-o", str(tmp_path / out)]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, (command, result.output)


@pytest.mark.parametrize("command", ["read", "search"])
def test_timeout_is_the_commands_whole_wait_not_each_steps(command: str, cube: Any, tmp_path: Path) -> None:
    """Each answer takes 1 s: the item, the blob and the frames each fit in 1.6 s, all of them do not; --timeout 1.6 ends the
    command, where each step had the whole 1.6 s to itself and the command succeeded after 3 s or more."""
    from catalog.collections import build_catalog
    from catalog.testing import RangeRequestServer

    item = create_item(cube.path, cube.blob_path, data_href="cube.rumi", header_href="cube.rumih", thumbnail=False, inline_header_limit=0)
    (cube.dir / "item.json").write_text(json.dumps(item.to_dict(include_self_link=False)))
    build_catalog([item.clone()], cube.dir / "stac", catalog_id="slow")
    (cube.dir / "stac" / "items.parquet").unlink()  # walked item by item: one request per document
    with RangeRequestServer(cube.dir, latency=1.0) as slow:
        target = slow.url("stac/catalog.json" if command == "search" else "item.json")
        out = [] if command == "search" else ["-o", str(tmp_path / "x.npy")]
        result = CliRunner().invoke(cli, [command, target, *out, "--timeout", "1.6"])
    assert result.exit_code == 1, result.output
    assert "the time allowed ran out" in result.output or "deadline" in result.output or "within" in result.output, result.output


def test_export_one_geotiff_per_time_step(cube: Any, tmp_path: Path) -> None:
    out = tmp_path / "exp.tif"
    result = CliRunner().invoke(cli, ["export", str(cube.path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    written = sorted(tmp_path.glob("exp_*.tif"))
    assert [p.name for p in written] == ["exp_20210101T000000.tif", "exp_20210111T000000.tif", "exp_20210121T103000.tif"]
    for t, path in enumerate(written):
        with rasterio.open(path) as ds:
            assert ds.count == 4 and ds.crs.to_epsg() == 32633
            assert ds.descriptions[2] == "B4, Red, 665nm"
            assert ds.tags()["TIME"].startswith("2021-01-")
            np.testing.assert_array_equal(ds.read(), cube.data[t])


def test_export_and_read_to_geotiff_keep_each_bands_scale_offset_and_unit(cube: Any, tmp_path: Path) -> None:
    """The item's radiometry goes into the GeoTIFF, where GDAL applies it (``gdalinfo`` shows Offset, Scale, Unit Type);
    bands that state none are written as before, with scale 1 and offset 0."""
    stated = [{"scale": 0.0001, "offset": -0.1}, {"scale": 2.75e-05, "offset": -0.2, "unit": "K"}, {"unit": "metre"}, {}]
    item = create_item(cube.path, cube.blob_path, extra={"bands": stated}, thumbnail=False)
    (tmp_path / "item.json").write_text(json.dumps(item.to_dict(include_self_link=False)))
    runner = CliRunner()
    exported = runner.invoke(cli, ["export", str(tmp_path / "item.json"), "-o", str(tmp_path / "exp.tif")])
    assert exported.exit_code == 0, exported.output
    read = runner.invoke(cli, ["read", str(tmp_path / "item.json"), "--times", "0,1", "-o", str(tmp_path / "read.tif")])
    assert read.exit_code == 0, read.output
    expected = ((0.0001, 2.75e-05, 1.0, 1.0), (-0.1, -0.2, 0.0, 0.0), (None, "K", "metre", None))
    for path, repeat in ((sorted(tmp_path.glob("exp_*.tif"))[0], 1), (tmp_path / "read.tif", 2)):
        with rasterio.open(path) as ds:
            assert (ds.scales, ds.offsets, tuple(u or None for u in ds.units)) == tuple(v * repeat for v in expected), path.name
    plain = runner.invoke(cli, ["export", str(cube.path), "-o", str(tmp_path / "plain.tif")])
    assert plain.exit_code == 0, plain.output
    with rasterio.open(sorted(tmp_path.glob("plain_*.tif"))[0]) as ds:
        assert ds.scales == (1.0,) * 4 and ds.offsets == (0.0,) * 4 and not any(ds.units)


def test_an_export_that_cannot_read_says_so_not_that_it_cannot_write(cube: Any, server: RangeRequestServer, tmp_path: Path) -> None:
    from catalog.testing import Fault

    item = create_item(cube.path, cube.blob_path, data_href="cube.rumi", header_href="cube.rumih", thumbnail=False)
    (tmp_path / "item.json").write_text(json.dumps(item.to_dict(include_self_link=False)))
    server.inject(Fault("status", status=403))
    out = tmp_path / "out" / "exp.tif"
    out.parent.mkdir()
    result = CliRunner().invoke(cli, ["export", server.url("item.json"), "-o", str(out)])
    assert result.exit_code == 1 and "(HTTP 403)" in result.output and "cannot write" not in result.output, result.output
    assert list(out.parent.iterdir()) == []


def test_export_image_writes_the_named_file(tmp_path: Path) -> None:
    import rumi_core

    path = tmp_path / "img.rumi"
    data = np.arange(3 * 20 * 30, dtype="float32").reshape(3, 20, 30)
    rumi_core.write(path, data, bands=["a", "b", "c"], times=["2020-01-01"], crs=4326, transform=(0.1, 0, 5, 0, -0.1, 45))
    result = CliRunner().invoke(cli, ["export", str(path), "-o", str(tmp_path / "img.tif")])
    assert result.exit_code == 0, result.output
    with rasterio.open(tmp_path / "img.tif") as ds:
        np.testing.assert_array_equal(ds.read(), data)
        assert ds.descriptions == ("a", "b", "c")


def test_export_refuses_what_geotiff_cannot_hold(tmp_path: Path) -> None:
    import ml_dtypes  # registers bfloat16 with NumPy, which this test may be the first to need

    import rumi_core

    path = tmp_path / "bf.rumi"
    rumi_core.write(path, np.zeros((1, 4, 4), dtype=ml_dtypes.bfloat16), bands=["x"], times=["2020-01-01"])
    result = CliRunner().invoke(cli, ["export", str(path), "-o", str(tmp_path / "bf.tif")])
    assert result.exit_code == 1 and "GeoTIFF cannot hold bfloat16" in result.output


@pytest.mark.parametrize("encoding", [e for e in ENCODINGS if e.dtype.type.__module__.startswith("ml_dtypes")], ids=lambda e: e.name)
def test_an_npy_of_an_ml_dtypes_type_loads_and_views_back_bit_for_bit(tmp_path: Path, encoding: Any) -> None:
    """.npy has no code for bfloat16 or the float8 types: their bits are saved as void (float8_e5m2 was '<f1', which np.load refused)."""
    bits = np.arange(256, dtype="uint8" if encoding.dtype.itemsize == 1 else "uint16").reshape(1, 1, 16, 16)
    path = tmp_path / "f.rumi"
    rumi_core.write(path, bits.view(encoding.dtype), bands=["x"], times=["2020-01-01"])
    result = CliRunner().invoke(cli, ["read", str(path), "-o", str(tmp_path / "f.npy")])
    assert result.exit_code == 0, result.output
    assert f"load with np.load(...).view(ml_dtypes.{encoding.dtype})" in result.stderr
    loaded = np.load(tmp_path / "f.npy")
    assert loaded.dtype == np.dtype(f"V{encoding.dtype.itemsize}")
    np.testing.assert_array_equal(loaded.view(bits.dtype), bits[0])  # one time step: (B, Y, X)
    assert loaded.view(encoding.dtype).dtype == encoding.dtype


@pytest.mark.parametrize("suffix", [".npy", ".tif"])
def test_legacy_options_still_work(cube: Any, tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"legacy{suffix}"
    args = ["read", str(cube.path), "--header", str(cube.blob_path), "--bands", "0,2", "--times", "1,2", "--window", "10:90,5:120",
            "-o", str(out)]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    expected = cube.data[[1, 2]][:, [0, 2], 10:90, 5:120]
    if suffix == ".npy":
        np.testing.assert_array_equal(np.load(out), expected)
    else:
        with rasterio.open(out) as ds:
            np.testing.assert_array_equal(ds.read(), expected.reshape(4, 80, 115))


def test_a_rumi_file_served_under_another_name_is_read_as_one(cube: Any, server: RangeRequestServer, tmp_path: Path) -> None:
    """As a local one is: its first bytes say what it is, where its name does not."""
    (tmp_path / "cube.bin").write_bytes(cube.path.read_bytes())
    (tmp_path / "cube.binh").write_bytes(cube.blob_path.read_bytes())
    out = tmp_path / "out.npy"
    result = CliRunner().invoke(cli, ["read", server.url("cube.bin"), "--window", "0:16,0:16", "-o", str(out)])
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(np.load(out), cube.data[:, :, :16, :16])


def test_a_remote_items_hrefs_resolve_on_its_server_never_to_local_files(cube: Any, server: RangeRequestServer, tmp_path: Path) -> None:
    """RFC 3986: "/data/cube.rumi" in an item at http://host/stac/item.json is http://host/data/cube.rumi, not a path on this
    machine; a file: URL in a remote item is refused, naming it, and nothing local is read."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "cube.rumi").write_bytes(cube.path.read_bytes())
    (tmp_path / "stac").mkdir()
    for name, data_href in (("rooted", "/data/cube.rumi"), ("local", f"file://{cube.path}")):
        item = create_item(cube.path, cube.blob_path, data_href=data_href, thumbnail=False)
        (tmp_path / "stac" / f"{name}.json").write_text(json.dumps(item.to_dict(include_self_link=False)))
    out = tmp_path / "out.npy"
    result = CliRunner().invoke(cli, ["read", server.url("stac/rooted.json"), "--window", "0:16,0:16", "-o", str(out)])
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(np.load(out), cube.data[:, :, :16, :16])
    assert any(r.path == "/data/cube.rumi" for r in server.served)
    result = CliRunner().invoke(cli, ["read", server.url("stac/local.json"), "-o", str(tmp_path / "no.npy")])
    assert result.exit_code == 1
    assert f"names 'file://{cube.path}', a file on this machine, which a remote document may not" in result.output
    assert not (tmp_path / "no.npy").exists()


def test_the_search_table_shows_no_password_or_signature(cube: Any, server: RangeRequestServer) -> None:
    """Hrefs found under a root given with ``user:password@`` and a signed query carry both; the table shows
    neither, as an error would not. ``--json`` keeps each href whole, for a program to read the file with."""
    build_catalog([create_item(cube.path, cube.blob_path, thumbnail=False)], cube.path.parent / "stac", catalog_id="c")
    root = server.url("stac/catalog.json").replace("://", "://alice:s3cr3t@") + "?X-Goog-Signature=deadbeef&v=2"
    table = CliRunner().invoke(cli, ["search", root])
    assert table.exit_code == 0, table.output
    assert "://alice@" in table.output and "s3cr3t" not in table.output and "deadbeef" not in table.output, table.output
    hits = json.loads(CliRunner().invoke(cli, ["search", root, "--json"]).output)
    assert hits[0]["data"].startswith(server.url("").replace("://", "://alice:s3cr3t@")), hits


def test_the_search_table_escapes_control_characters(tmp_path: Path) -> None:
    """A band text with a newline or a terminal escape broke the table's rows or drove the terminal."""
    path = tmp_path / "c.rumi"
    blob = rumi_core.write(path, np.zeros((2, 8, 8), "uint8"), bands=["red\nline\x1b[31m", "nir"], times=["2020-01-01"],
                           crs="EPSG:32633", transform=(10, 0, 500000, 0, -10, 4000000))  # fmt: skip
    (tmp_path / "c.rumih").write_bytes(blob)
    build_catalog([create_item(path, tmp_path / "c.rumih", thumbnail=False)], tmp_path / "stac", catalog_id="c")
    table = CliRunner().invoke(cli, ["search", str(tmp_path / "stac")])
    assert table.exit_code == 0, table.output
    assert "\x1b" not in table.output and len(table.output.splitlines()) == 2 and "\\n" in table.output, table.output


def test_a_file_whose_transform_has_no_area_reads_its_pixels_and_refuses_only_a_place(cube: Any, tmp_path: Path) -> None:
    """x_res = 0 breaks no rule of the specification (rumi validate: valid); rumi read refused even the .npy."""
    from rumi_core.georef import GEOREF_BYTES
    from rumi_core.header import HeaderBlob

    raw = bytearray(cube.path.read_bytes())
    matrix = HeaderBlob.from_bytes(cube.blob).base_frame_offset - GEOREF_BYTES  # ModelTransformationTag's 16 doubles
    raw[matrix : matrix + 8] = np.float64(0.0).tobytes()
    path = tmp_path / "flat.rumi"
    path.write_bytes(bytes(raw))
    runner = CliRunner()
    assert runner.invoke(cli, ["validate", str(path)]).exit_code == 0
    result = runner.invoke(cli, ["read", str(path), "--bands", "1", "-o", str(tmp_path / "x.npy")])
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(np.load(tmp_path / "x.npy"), cube.data[:, [1]])
    for args in (["-o", str(tmp_path / "x.tif")], ["--bbox", "15,36.1,15.01,36.11", "-o", str(tmp_path / "y.npy")]):
        refused = runner.invoke(cli, ["read", str(path), *args])
        assert refused.exit_code == 1 and "maps it to a point or a line (a*e - b*d is 0)" in refused.output, refused.output
        assert "Traceback" not in refused.output
