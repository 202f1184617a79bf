"""With a header blob, remote reads never fetch the head, and URLs work wherever a path does.

Requests are counted by the local range server: the blob replaced the head,
band texts and times come from the item (or, for a bare file, from its
trailer, fetched once and only when asked), and a bare file's
georeferencing is the 160 bytes before its frames.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import xarray as xr
from click.testing import CliRunner

import rumi_core
from catalog.cube import Cube
from catalog.items import create_item
from rumi_core.cli.main import cli
from rumi_core.errors import HeaderMismatchError
from rumi_core.georef import GEOREF_BYTES
from rumi_core.header import HeaderBlob

from .conftest import write_cube

if TYPE_CHECKING:
    from pathlib import Path

    from catalog.testing import RangeRequestServer


def _ranges(server: RangeRequestServer, name: str) -> list[tuple[int, int]]:
    """``(first, last)`` byte of every range request for ``name``."""
    out = []
    for r in server.served:
        if r.path.endswith("/" + name) and r.range:
            first, last = r.range.removeprefix("bytes=").split("-")
            out.append((int(first), int(last)))
    return out


def _georef_range(blob: bytes) -> tuple[int, int]:
    end = HeaderBlob.from_bytes(blob).base_frame_offset
    return end - GEOREF_BYTES, end - 1


def _frames_only(server: RangeRequestServer, blob: bytes) -> bool:
    base = HeaderBlob.from_bytes(blob).base_frame_offset
    return all(first >= base for first, _ in _ranges(server, "cube.rumi"))


def test_bare_url_with_blob_never_reads_the_head(cube: Any, server: RangeRequestServer) -> None:
    with Cube.open(server.url("cube.rumi"), header=cube.blob) as c:
        result = c.read(bands=[1], times=[0], window=((0, 10), (0, 10)), labels=False)
        assert _frames_only(server, cube.blob)
        assert server.requests() == 1  # one frame, nothing else
        server.reset()
        labelled = c.read(bands=[1], times=[0], window=((0, 10), (0, 10)))
    np.testing.assert_array_equal(result.data, cube.data[[0]][:, [1], :10, :10])
    # Labels cost the trailer and the 160 georeferencing bytes, once, and never the head.
    ranges = _ranges(server, "cube.rumi")
    assert _georef_range(cube.blob) in ranges
    assert all(first != 0 for first, _ in ranges)
    assert len(ranges) == 3
    assert labelled.crs == "EPSG:32633" and labelled.transform is not None and labelled.transform.c == 500000.0
    assert [b.name for b in labelled.bands] == ["B3"]


def test_xarray_open_of_a_bare_url_never_reads_the_head(cube: Any, server: RangeRequestServer) -> None:
    with xr.open_dataset(server.url("cube.rumi"), engine="rumi") as ds:
        ranges = _ranges(server, "cube.rumi")
        assert all(first != 0 for first, _ in ranges)
        assert len(ranges) == 2  # trailer (band names, times) and georeferencing, at open
        assert server.requests("cube.rumih") == 1
        assert ds.x.values[0] == 500005.0


def test_xarray_open_of_an_item_sends_nothing_to_the_file(cube: Any, server: RangeRequestServer, tmp_path: Path) -> None:
    item = create_item(cube.path, cube.blob_path, data_href="cube.rumi", header_href="cube.rumih", thumbnail=False)
    (tmp_path / "item.json").write_text(json.dumps(item.to_dict(include_self_link=False)))
    with xr.open_dataset(server.url("item.json"), engine="rumi") as ds:
        assert server.requests("cube.rumi") == 0
        assert list(ds.band.values) == ["B2", "B3", "B4", "B8"]


def test_cli_read_of_a_url_with_blob_requests_frames_only(cube: Any, server: RangeRequestServer, tmp_path: Path) -> None:
    out = tmp_path / "x.npy"
    args = ["read", server.url("cube.rumi"), "--header", str(cube.blob_path), "--bands", "1", "--times", "0", "-o", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert _frames_only(server, cube.blob)
    assert server.requests("cube.rumih") == 0
    np.testing.assert_array_equal(np.load(out), cube.data[[0]][:, [1]])


def test_urls_work_in_info_validate_header(cube: Any, server: RangeRequestServer, tmp_path: Path, monkeypatch: Any) -> None:
    url = server.url("cube.rumi")
    result = CliRunner().invoke(cli, ["info", url, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["shape"] == [3, 4, 100, 130]
    result = CliRunner().invoke(cli, ["validate", url, "--quick"])
    assert result.exit_code == 0, result.output
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cube.rumih").unlink()
    result = CliRunner().invoke(cli, ["header", url])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "cube.rumih").read_bytes() == cube.blob


def test_rumi_core_reads_a_url(cube: Any, server: RangeRequestServer) -> None:
    data = rumi_core.read(server.url("cube.rumi"), cube.blob, bands=[3], times=[2])
    np.testing.assert_array_equal(data, cube.data[[2]][:, [3]])
    assert _frames_only(server, cube.blob)


def test_rumi_core_read_accepts_the_names_rumi_read_accepts(cube: Any, server: RangeRequestServer, tmp_path: Path) -> None:
    data = rumi_core.read(server.url("cube.rumi"), cube.blob, bands=["red", "NIR", 0], times=[1])
    np.testing.assert_array_equal(data, cube.data[[1]][:, [2, 3, 0]])
    trailer_at = HeaderBlob.from_bytes(cube.blob).trailer_offset
    assert [first for first, _ in _ranges(server, "cube.rumi") if first >= trailer_at] == [trailer_at]  # one trailer request
    out = tmp_path / "cli.npy"
    args = ["read", str(cube.path), "--bands", "red,NIR,0", "--times", "1", "-o", str(out)]
    assert CliRunner().invoke(cli, args).exit_code == 0
    np.testing.assert_array_equal(np.load(out), data)


def test_a_blob_that_does_not_fit_the_items_file_size_is_refused_before_any_request(
    cube: Any, server: RangeRequestServer, tmp_path: Path
) -> None:
    item = create_item(cube.path, cube.blob_path, data_href="cube.rumi", header_href="cube.rumih", thumbnail=False).to_dict()
    item["assets"]["data"]["file:size"] = HeaderBlob.from_bytes(cube.blob).trailer_offset - 1
    (tmp_path / "item.json").write_text(json.dumps(item))
    with pytest.raises(HeaderMismatchError, match="does not fit"):
        Cube.open(server.url("item.json"))
    assert server.requests("cube.rumi") == 0


def test_a_header_blob_given_by_url_is_read_whole_for_read_info_and_validate(cube: Any, server: RangeRequestServer, tmp_path: Path) -> None:
    """``--header`` takes a URL as FILE_OR_URL does: the blob is asked for its size and read, the file's head is not."""
    header = server.url("cube.rumih")
    out = tmp_path / "x.npy"
    result = CliRunner().invoke(cli, ["read", server.url("cube.rumi"), "--header", header, "--bands", "1", "--times", "0", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert _frames_only(server, cube.blob) and server.requests("cube.rumih") <= 2
    np.testing.assert_array_equal(np.load(out), cube.data[[0]][:, [1]])
    result = CliRunner().invoke(cli, ["info", server.url("cube.rumi"), "--header", header, "--json"])
    assert result.exit_code == 0 and json.loads(result.output)["shape"] == [3, 4, 100, 130], result.output
    result = CliRunner().invoke(cli, ["validate", server.url("cube.rumi"), "--header", header, "--quick"])
    assert result.exit_code == 0, result.output
    missing = CliRunner().invoke(cli, ["info", server.url("cube.rumi"), "--header", server.url("none.rumih")])
    assert missing.exit_code != 0 and f"--header {server.url('none.rumih')}: cannot read" in missing.output
    assert "Traceback" not in missing.output


def test_validate_of_a_url_checks_the_blob_beside_it(cube: Any, server: RangeRequestServer, tmp_path: Path) -> None:
    """As beside a local file: a stale ``cube.rumih`` next to the URL is named; with none there, the file is checked alone."""
    url = server.url("cube.rumi")
    result = CliRunner().invoke(cli, ["validate", url, "--quick"])
    assert result.exit_code == 0 and f"and header blob {url}h checked" in result.output, result.output
    (tmp_path / "other").mkdir()
    cube.blob_path.write_bytes(write_cube(tmp_path / "other", seed=8).blob)  # the blob of another file of that shape
    stale = CliRunner().invoke(cli, ["validate", url, "--quick"])
    assert stale.exit_code == 1 and f"invalid: header blob {url}h" in stale.output, stale.output
    assert "Traceback" not in stale.output
    cube.blob_path.unlink()
    alone = CliRunner().invoke(cli, ["validate", url, "--quick"])
    assert alone.exit_code == 0, alone.output
    assert f"{url}: no header blob checked ({url}h: HEAD did not succeed (HTTP 404))" in alone.stderr
    assert alone.stdout == f"{url}: valid (structure checked)\n"


@pytest.mark.parametrize("command", [["validate"], ["header", "-o", "{tmp}/x.rumih"], ["info"]])
def test_timeout_bounds_validate_header_and_info_of_a_url(command: list[str], tmp_path: Path) -> None:
    """validate and header had no --timeout: against a server that never answers they waited 120 s."""
    import socket
    import time

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/x.rumi"
    start = time.monotonic()
    try:
        result = CliRunner().invoke(cli, [command[0], url, *(a.format(tmp=tmp_path) for a in command[1:]), "--timeout", "1"])
    finally:
        listener.close()
    assert result.exit_code in (1, 2) and "within the read's 1 s deadline" in result.output, result.output
    assert time.monotonic() - start < 30  # a guard against the 120 s it took, not a timing
