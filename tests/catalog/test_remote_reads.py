"""Reads over HTTP and GCS: exactly one request per frame run, none for metadata."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from click.testing import CliRunner

from catalog.cube import Cube
from catalog.errors import SelectorError, StorageError
from catalog.items import create_item
from rumi_core.cli.main import cli
from rumi_core.reader import plan_requests
from rumi_core.selection import resolve_selection

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from catalog.testing import RangeRequestServer


def expected_runs(
    blob_bytes: bytes, *, bands: list[int], times: list[int], rows: tuple[int, int], cols: tuple[int, int]
) -> list[tuple[int, int]]:
    """The ``(offset, length)`` requests a stateless read must make, from the layout alone."""
    from rumi_core.header import HeaderBlob

    blob = HeaderBlob.from_bytes(blob_bytes)
    sel = resolve_selection(blob.layout, bands=bands, times=times, window=(rows, cols))
    return [(r.offset, r.length) for r in plan_requests(blob, sel)]


def write_item(cube: Any, *, inline: bool = True) -> Path:
    item = create_item(
        cube.path,
        cube.blob_path,
        data_href="cube.rumi",
        header_href="cube.rumih",
        thumbnail=False,
        inline_header_limit=4096 if inline else 0,
    )
    path: Path = cube.dir / "item.json"
    path.write_text(json.dumps(item.to_dict(include_self_link=False)))
    return path


@pytest.mark.parametrize("frame_unit", [0, 9, 4])
def test_window_read_of_an_item_requests_only_frames(
    tmp_path: Path, server: RangeRequestServer, make_cube: Callable[..., Any], frame_unit: int
) -> None:
    cube = make_cube(tmp_path, frame_unit=frame_unit)
    write_item(cube, inline=True)
    with Cube.open(server.url("item.json")) as c:
        server.reset()  # the item itself is not metadata of the file
        result = c.read(bands="red,nir", times="2021-01-05/2021-01-31", window=((10, 90), (5, 120)), threads=4)
    np.testing.assert_array_equal(result.data, cube.data[1:3][:, [2, 3], 10:90, 5:120])
    runs = expected_runs(cube.blob, bands=[2, 3], times=[1, 2], rows=(10, 90), cols=(5, 120))
    asked = sorted(r.range or "" for r in server.served)
    assert asked == sorted(f"bytes={o}-{o + n - 1}" for o, n in runs)
    assert server.requests("cube.rumi") == len(runs)
    assert server.requests() == len(runs)  # nothing for the blob, head or trailer
    assert server.bytes_sent("cube.rumi") == sum(n for _, n in runs)
    assert result.crs == "EPSG:32633"
    assert result.transform is not None and (result.transform.c, result.transform.f) == (500050.0, 3999900.0)
    assert [b.name for b in result.bands] == ["B4", "B8"]
    assert result.times == ("2021-01-11T00:00:00Z", "2021-01-21T10:30:00Z")


def test_a_keyword_that_is_no_selector_is_refused_before_any_request(cube: Any, server: RangeRequestServer) -> None:
    """``band=`` for ``bands=`` read every band of every date, over HTTP the whole cube, and said nothing."""
    c = Cube.open(server.url("cube.rumi"))
    with pytest.raises(TypeError, match="unexpected keyword argument 'band'; the selectors are bands, times, bbox, bbox_crs, window"):
        c.read(band=[0], times=[0])  # type: ignore[call-arg]
    assert server.requests("cube.rumi") == 0


@pytest.mark.parametrize(
    ("selectors", "expected"),
    [
        ({"bands": 1}, (slice(None), [1])),
        ({"bands": np.int64(3)}, (slice(None), [3])),
        ({"bands": slice(1, 3)}, (slice(None), [1, 2])),
        ({"bands": [np.int64(0), 2]}, (slice(None), [0, 2])),
        ({"times": 2}, ([2], slice(None))),
        ({"times": slice(None, None, -1)}, ([2, 1, 0], slice(None))),
    ],
)
def test_a_cube_takes_one_position_or_a_slice_as_rumi_core_does(cube: Any, selectors: dict[str, Any], expected: tuple[Any, Any]) -> None:
    """``bands=1`` was a bare TypeError ('int' object is not iterable)."""
    with Cube.open(cube.path) as opened:
        got = opened.read(labels=False, **selectors).as_cube()
    np.testing.assert_array_equal(got, cube.data[expected[0]][:, expected[1]])


@pytest.mark.parametrize(
    ("selectors", "match"),
    [
        ({"bands": [True]}, "band positions are integers, not True"),
        ({"bands": [np.False_]}, "band positions are integers, not np.False_"),
        ({"times": [True]}, "time positions are integers, not True"),
        ({"bands": 1.5}, "bands are selected by a position or a sequence of them, not by 1.5"),
    ],
)
def test_a_cube_refuses_a_boolean_for_a_position(cube: Any, selectors: dict[str, Any], match: str) -> None:
    """``bands=[True]`` read band 1, where ``times=[True]`` and rumi_core refused it."""
    with Cube.open(cube.path) as opened, pytest.raises(SelectorError, match=re.escape(match)):
        opened.read(**selectors)


def test_a_header_blob_is_taken_by_its_path_or_url_as_the_command_line_takes_it(cube: Any, server: RangeRequestServer) -> None:
    """``rumi_core.read(path, header=URL)`` opened the URL as a local path (a bare FileNotFoundError), and
    ``Cube.open(header=Path(...))`` parsed the path's own characters as a blob."""
    import pathlib

    import rumi_core

    np.testing.assert_array_equal(rumi_core.read(cube.path, server.url("cube.rumih"), times=[1]), cube.data[[1]])
    with rumi_core.open(server.url("cube.rumi"), server.url("cube.rumih")) as ds:
        np.testing.assert_array_equal(ds.read(times=[2]), cube.data[[2]])
    for given in (cube.blob_path, str(cube.blob_path), server.url("cube.rumih")):
        with Cube.open(cube.path, header=given) as opened:
            assert opened.header.to_bytes() == cube.blob
    with pytest.raises(StorageError, match=r"none\.rumih: cannot read the header blob: No such file or directory"):
        Cube.open(cube.path, header=pathlib.Path(cube.dir / "none.rumih"))
    with pytest.raises(StorageError, match=r"none\.rumih: HEAD did not succeed \(HTTP 404\)"):
        rumi_core.read(cube.path, server.url("none.rumih"))


def test_a_closed_cube_reads_nothing(cube: Any, server: RangeRequestServer) -> None:
    """A cube over HTTP went on reading after close; it now says it is closed, as a local one's file does."""
    c = Cube.open(server.url("cube.rumi"))
    c.close()
    c.close()
    assert c.closed and repr(c).startswith("<closed catalog.Cube")
    before = server.requests("cube.rumi")
    with pytest.raises(StorageError, match=r"cube\.rumi: the cube is closed"):
        c.read(bands=[0], times=[0])
    assert server.requests("cube.rumi") == before


def test_blob_is_fetched_once_when_not_inline(cube: Any, server: RangeRequestServer) -> None:
    write_item(cube, inline=False)
    with Cube.open(server.url("item.json")) as c:
        server.reset()
        c.read(bands=[0], times=[0], window=((0, 10), (0, 10)))
    assert server.requests("item.json") == 0
    # The blob was fetched while opening, before the reset; reading needed one frame.
    assert server.requests() == 1
    server.reset()
    with Cube.open(server.url("item.json")) as c:
        pass
    assert [r.path for r in server.served] == ["/item.json", "/cube.rumih"]


def test_bare_file_url_fetches_blob_then_frames(cube: Any, server: RangeRequestServer) -> None:
    with Cube.open(server.url("cube.rumi")) as c:
        result = c.read(bands=[1], times=[0, 2], window=((64, 100), (96, 130)), labels=False)
    np.testing.assert_array_equal(result.data, cube.data[[0, 2]][:, [1], 64:100, 96:130])
    runs = expected_runs(cube.blob, bands=[1], times=[0, 2], rows=(64, 100), cols=(96, 130))
    assert server.requests("cube.rumih") == 1
    assert server.requests("cube.rumi") == len(runs)


def test_a_bare_file_urls_query_goes_with_its_blobs_name(cube: Any, server: RangeRequestServer) -> None:
    """A URL with a query (a token a server checks, a cache buster) has its blob at ``x.rumih?query``: appending the ``h``
    to the query asked for ``x.rumi`` itself, whose head then failed as a blob."""
    with Cube.open(server.url("cube.rumi") + "?token=abc&v=2") as c:
        result = c.read(bands=[1], times=[0], window=((0, 40), (0, 30)), labels=False)
    np.testing.assert_array_equal(result.data, cube.data[[0]][:, [1], 0:40, 0:30])
    assert server.requests("cube.rumih") == 1
    assert all(r.range is not None for r in server.served if r.path == "/cube.rumi")  # never the whole file


def test_bare_file_names_and_bbox_cost_one_request_each(cube: Any, server: RangeRequestServer) -> None:
    with Cube.open(server.url("cube.rumi")) as c:
        server.reset()
        result = c.read(bands="nir", times="2021-01-21/..", bbox=(500100, 3999500, 500200, 3999900), bbox_crs="EPSG:32633")
    np.testing.assert_array_equal(result.data, cube.data[[2]][:, [3], 10:50, 10:20])
    runs = expected_runs(cube.blob, bands=[3], times=[2], rows=(10, 50), cols=(10, 20))
    assert server.requests("cube.rumi") == len(runs) + 2  # + trailer + the 160 georeferencing bytes


@pytest.mark.parametrize("bbox_crs", ["EPSG:32633", "32633", "+proj=utm +zone=33 +datum=WGS84"])
def test_a_bbox_crs_is_any_text_proj_reads(cube: Any, bbox_crs: str) -> None:
    with Cube.open(cube.path) as c:
        result = c.read(times=[0], bbox=(500100, 3999500, 500200, 3999900), bbox_crs=bbox_crs)
    assert result.window == ((10, 50), (10, 20))


def test_lonlat_bbox_selects_the_covering_window(cube: Any, server: RangeRequestServer) -> None:
    from pyproj import Transformer

    to_lonlat = Transformer.from_crs("EPSG:32633", "EPSG:4326", always_xy=True)
    (x0, x1), (y0, y1) = to_lonlat.transform([500105, 500195], [3999505, 3999895])
    write_item(cube)
    with Cube.open(server.url("item.json")) as c:
        result = c.read(bbox=(x0, y0, x1, y1), times=[0])
    (r0, r1), (c0, c1) = result.window
    assert r0 <= 10 and r1 >= 50 and c0 <= 10 and c1 >= 20
    assert r1 - r0 <= 42 and c1 - c0 <= 12


def test_gcs_read_of_an_item(cube: Any, gcs_upload: Callable[[Path, str], str], tmp_path: Path) -> None:
    prefix = f"{tmp_path.name}"
    gcs_upload(cube.path, f"{prefix}/cube.rumi")
    gcs_upload(cube.blob_path, f"{prefix}/cube.rumih")
    write_item(cube, inline=False)
    gcs_upload(cube.dir / "item.json", f"{prefix}/item.json")
    with Cube.open(f"gs://rumi/{prefix}/item.json") as c:
        result = c.read(bands="blue,green", times=[1], window=((5, 99), (0, 130)), threads=4)
    np.testing.assert_array_equal(result.data, cube.data[[1]][:, [0, 1], 5:99, :])


def test_unknown_band_name_says_what_exists(cube: Any) -> None:
    with Cube.open(cube.path) as c, pytest.raises(SelectorError, match="no band is called 'swir'; the bands are B2"):
        c.read(bands="swir")


def test_time_range_outside_the_cube(cube: Any) -> None:
    with Cube.open(cube.path) as c, pytest.raises(SelectorError, match="no time step falls in"):
        c.read(times="2030-01-01/2030-02-01")


def test_times_by_month_and_positions_that_look_like_dates(cube: Any) -> None:
    """ISO 8601's reduced precision: 2021-01 is all of January; 20210111 is no position, and the error says how to write it."""
    with Cube.open(cube.path) as c:
        assert len(c.read(times="2021-01", bands=[0], window=((0, 2), (0, 2))).times) == 3
        assert len(c.read(times="2021-01-05/2021-01", bands=[0], window=((0, 2), (0, 2))).times) == 2
        with pytest.raises(SelectorError, match="no time step falls in 2021-02-01T00:00:00Z/2021-02-28T23:59:59Z"):
            c.read(times="2021-02")
        with pytest.raises(SelectorError, match=r"time position 20210111 is outside 0\.\.2; a date is written 2020-02-15"):
            c.read(times="20210111")
        with pytest.raises(SelectorError, match=r"band position -1 is outside 0\.\.3"):
            c.read(bands="-1")


def test_bbox_outside_the_raster(cube: Any) -> None:
    with Cube.open(cube.path) as c, pytest.raises(SelectorError, match="does not overlap"):
        c.read(bbox=(0.0, 0.0, 1.0, 1.0))


@pytest.mark.parametrize("bbox", [(12, 91, 13, 95), (12, 52, 13, 95), (500100, 3999500, 500200, 3999900)], ids=["past", "partly", "metres"])
def test_a_lonlat_bbox_with_latitudes_past_the_poles_is_refused(cube: Any, tmp_path: Path, bbox: tuple[float, ...]) -> None:
    """Metres given without their CRS, or a latitude past 90: PROJ made NaN of them (a ValueError traceback from
    ``rumi read``) or clamped part of the box, and the read returned the whole image."""
    with Cube.open(cube.path) as c, pytest.raises(SelectorError, match=r"is not in degrees: latitudes are within -90\.\.90"):
        c.read(bbox=bbox)
    result = CliRunner().invoke(cli, ["read", str(cube.path), "--bbox", ",".join(map(str, bbox)), "-o", str(tmp_path / "x.npy")])
    assert result.exit_code == 2 and "is not in degrees" in result.output and "Traceback" not in result.output


def test_local_file_without_blob_builds_one(cube: Any) -> None:
    cube.blob_path.unlink()
    with Cube.open(cube.path) as c:
        np.testing.assert_array_equal(c.read(bands="B8", times=[0]).data, cube.data[[0]][:, [3]])


def test_bare_file_url_without_blob_reads_the_files_head(cube: Any, server: RangeRequestServer) -> None:
    """As for a local file: no ``<file>h`` beside it (a 404) means the blob is built from the file's own head."""
    cube.blob_path.unlink()
    with Cube.open(server.url("cube.rumi")) as c:
        result = c.read(bands="B8", times=[1], window=((3, 40), (7, 66)))
    np.testing.assert_array_equal(result.data, cube.data[[1]][:, [3], 3:40, 7:66])
    assert server.requests("cube.rumih") == 1 and server.requests("cube.rumi") >= 2


def test_a_missing_file_url_is_named_not_its_blob(cube: Any, server: RangeRequestServer) -> None:
    from catalog.errors import StorageError

    with pytest.raises(StorageError, match=r"/none\.rumi: .*\(HTTP 404\)"):
        Cube.open(server.url("none.rumi"))


def test_a_broken_blob_beside_a_file_is_named(cube: Any) -> None:
    """The frames are located by ``<file>h``: when it is at fault, the error says so, not that the file is."""
    from rumi_core.errors import HeaderMismatchError, InvalidHeaderError

    cube.blob_path.write_bytes(cube.blob[:40])
    with pytest.raises(InvalidHeaderError, match=r"^header blob .*cube\.rumih: the blob is 40 bytes.*; rumi header FILE rebuilds it"):
        Cube.open(cube.path)
    cube.blob_path.write_bytes(cube.blob)
    cube.path.write_bytes(cube.path.read_bytes()[:-5000])  # cut inside the frames
    with pytest.raises(HeaderMismatchError, match=r"^header blob .*cube\.rumih: the header blob does not fit"):
        Cube.open(cube.path)


def test_a_blob_beside_a_file_that_is_not_its_own_is_named_before_any_read(tmp_path: Path, server: RangeRequestServer) -> None:
    """No item's checksum vouches for ``<file>h``: what it duplicates is compared with the file's head.

    A blob of another file of the same layout fits the file's size and placed frames where there were none; one that
    differs from the file's only in its frame unit or sample format (the same frame sizes) read bands for times, or
    float32 samples as uint32, without a word.
    """
    import rumi_core
    from rumi_core.errors import FrameDecodeError, HeaderMismatchError

    shape = (2, 3, 32, 32)
    noisy = np.random.default_rng(1).integers(0, 60000, shape, dtype=np.uint16)
    common = {"bands": ["a", "b", "c"], "times": ["2021-01-01", "2021-01-02"], "tile_size": 16}
    own = rumi_core.write(tmp_path / "a.rumi", noisy, **common)
    other = rumi_core.write(tmp_path / "b.rumi", np.zeros(shape, np.uint16), **common)
    swapped = rumi_core.write(tmp_path / "c.rumi", noisy, frame_unit=9, **common)  # times and bands change places
    for blob, field in ((other, "TileByteCounts"), (swapped, "FrameUnit")):
        (tmp_path / "a.rumih").write_bytes(blob)
        with pytest.raises(HeaderMismatchError, match=rf"^header blob .*a\.rumih: .*the file's {field}.*rumi header FILE rebuilds it"):
            Cube.open(tmp_path / "a.rumi")
    # A URL's blob is what saves a remote reader the head's request: frames that do not decode name it instead.
    (tmp_path / "a.rumih").write_bytes(other)
    with (
        Cube.open(server.url("a.rumi")) as c,
        pytest.raises(FrameDecodeError, match=r"the frames were located by .*a\.rumih, which may be another file's blob"),
    ):
        c.read()
    (tmp_path / "a.rumih").write_bytes(own)
    with Cube.open(tmp_path / "a.rumi") as c:
        np.testing.assert_array_equal(c.read().data, noisy)


def test_a_failed_read_shows_its_own_failure_when_the_size_check_after_it_fails_too(cube: Any, server: RangeRequestServer) -> None:
    """After a failed read the file's size is checked against the item's (a stale offset would explain the failure);
    a server that answers nothing answers that HEAD neither, and the error names the ranges that were not read."""
    from catalog.errors import StorageError
    from catalog.testing import Fault

    with Cube.open(server.url(write_item(cube).name)) as c:
        server.inject(Fault("silent"))
        with pytest.raises(StorageError, match=r"GET of bytes") as caught:
            c.read(bands=[0], times=[0], timeout=1)
    assert "HEAD" not in str(caught.value)
