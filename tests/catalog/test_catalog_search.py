"""The catalogue tree, its stac-geoparquet index, and searching it (index, walk, STAC API)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from typing import TYPE_CHECKING, Any

import pystac
import pytest
from click.testing import CliRunner

from catalog.collections import build_catalog
from catalog.cube import Cube
from catalog.errors import CatalogError, SearchError, SelectorError, StorageError
from catalog.index import INDEX_NAME
from catalog.items import EO_URI, PROJECTION_URI, create_item
from catalog.search import SearchHit, search
from catalog.selectors import TimeRange
from catalog.validation import validate_stac
from rumi_core.cli.main import cli

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path


LATE_TIMES = ["2021-06-01", "2021-06-11", "2021-06-21"]


@pytest.fixture
def catalogue(tmp_path: Path, make_cube: Callable[..., Any]) -> Path:
    """Three cubes: two on one grid (January, June) of dataset s2, one of dataset other; catalogue in data/stac."""
    data = tmp_path / "data"
    data.mkdir()
    jan = make_cube(data, "s2_jan")
    jun = make_cube(data, "s2_jun", times=LATE_TIMES, seed=3)
    oth = make_cube(data, "other_jan", seed=5)
    items = [
        create_item(jan.path, jan.blob_path, extra={"dataset": "s2"}),
        create_item(jun.path, jun.blob_path, extra={"dataset": "s2"}),
        create_item(oth.path, oth.blob_path, extra={"dataset": "other", "bands": [{"common_name": "coastal"}]}),
    ]
    build_catalog(items, data / "stac", catalog_id="demo", title="demo cubes")
    return data / "stac"


def test_tree_layout_and_relative_links(catalogue: Path) -> None:
    root = json.loads((catalogue / "catalog.json").read_text())
    children = [ln["href"] for ln in root["links"] if ln["rel"] == "child"]
    assert len(children) == 2 and all(h.startswith("./") for h in children)
    assert any(ln["rel"] == "alternate" and ln["href"] == f"./{INDEX_NAME}" for ln in root["links"])
    for path in catalogue.rglob("*.json"):
        doc = json.loads(path.read_text())
        for link in doc.get("links", []):
            assert not os.path.isabs(link["href"]) and "://" not in link["href"], (path, link)
        for asset in doc.get("assets", {}).values():
            assert not os.path.isabs(asset["href"]), (path, asset)
        validate_stac(doc)


def test_collections_group_by_dataset_and_grid(catalogue: Path) -> None:
    cols = sorted(p.parent.name for p in catalogue.glob("*/collection.json"))
    assert cols[0].startswith("other-32633-") and cols[1].startswith("s2-32633-")
    s2 = json.loads((catalogue / cols[1] / "collection.json").read_text())
    assert s2["extent"]["temporal"]["interval"] == [["2021-01-01T00:00:00Z", "2021-06-21T00:00:00Z"]]
    assert len([ln for ln in s2["links"] if ln["rel"] == "item"]) == 2
    assert s2["license"] == "other"
    # Titled by their grid too: a thousand grid locations of one CRS had a thousand titles "s2 on EPSG:32633".
    item = json.loads(next((catalogue / cols[1]).glob("*/*.json")).read_text())["properties"]
    a, _, c, _, _, f = item["proj:transform"][:6]
    height, width = item["proj:shape"]
    assert s2["title"] == f"s2 on EPSG:32633, {width} x {height} pixels of {a:.15g} from ({c:.15g}, {f:.15g})"


def test_collections_summarise_their_items_codes_bands_and_assets(catalogue: Path, stac_schemas: Path) -> None:
    """A user learns a collection's CRS, bands and asset keys from it alone, as pystac reads them."""
    for doc_path in catalogue.glob("*/collection.json"):
        collection = pystac.Collection.from_file(str(doc_path))
        items = list(collection.get_items())
        data_bands = items[0].assets["data"].extra_fields["bands"]
        assert collection.summaries.get_list("proj:code") == ["EPSG:32633"]
        assert collection.summaries.get_list("bands") == data_bands
        assert sorted(collection.item_assets) == sorted(items[0].assets)
        data = collection.item_assets["data"]
        assert (data.media_type, data.roles, data.title) == ("application/vnd.rumi", ["data"], "rumi Cube")
        assert data.properties["bands"] == data_bands
        assert "href" not in data.properties and "file:size" not in data.properties
        uses_eo = any("eo:common_name" in b for b in data_bands)
        assert (EO_URI in collection.stac_extensions) == uses_eo and PROJECTION_URI in collection.stac_extensions
        assert validate_stac(collection, schema_dir=str(stac_schemas), require_all=True).unchecked == ()


def test_bands_that_differ_between_items_are_summarised_apart(make_cube: Callable[..., Any], tmp_path: Path, stac_schemas: Path) -> None:
    a, b = make_cube(tmp_path, "a"), make_cube(tmp_path, "b", times=LATE_TIMES, seed=3)
    items = [
        create_item(a.path, a.blob_path, extra={"dataset": "s2"}),
        create_item(b.path, b.blob_path, extra={"dataset": "s2", "bands": [{"common_name": "coastal"}]}),
    ]
    build_catalog(items, tmp_path / "stac")
    (doc_path,) = (tmp_path / "stac").glob("*/collection.json")
    collection = pystac.Collection.from_file(str(doc_path))
    first_a, first_b = (it.assets["data"].extra_fields["bands"][0] for it in items)
    assert first_a != first_b
    summarised = collection.summaries.get_list("bands")
    assert first_a in summarised and first_b in summarised
    assert "bands" not in collection.item_assets["data"].properties
    assert EO_URI in collection.stac_extensions
    validate_stac(collection, schema_dir=str(stac_schemas), require_all=True)


def _without_nulls(value: Any) -> Any:
    """What stac-geoparquet's columns add back: a null for each field another row has."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return [_without_nulls(v) for v in value] if isinstance(value, list) else value


def test_the_index_rows_are_valid_stac_items_linked_to_their_collection(catalogue: Path, stac_schemas: Path) -> None:
    """STAC allows an item's ``collection`` field only beside a ``collection`` link: the index's rows keep one, relative."""
    from stac_geoparquet.arrow import stac_table_to_items

    from catalog.index import read_index_table

    rows = [_without_nulls(row) for row in stac_table_to_items(read_index_table(catalogue / INDEX_NAME))]
    assert len(rows) == 3
    for row in rows:
        row["properties"].setdefault("datetime", None)  # the null STAC requires beside start and end
        assert validate_stac(row, schema_dir=str(stac_schemas), require_all=True).unchecked == ()
        (link,) = [ln for ln in row["links"] if ln["rel"] == "collection"]
        assert json.loads((catalogue / link["href"]).read_text())["id"] == row["collection"]


def test_an_item_without_geometry_is_refused_by_the_index_before_anything_is_written(tmp_path: Path) -> None:
    import numpy as np

    import rumi_core

    blob = rumi_core.write(tmp_path / "a.rumi", np.zeros((1, 1, 8, 8), "uint8"), bands=["b"], times=["2021-01-01"], tile_size=8)
    (tmp_path / "a.rumih").write_bytes(blob)
    item = create_item(tmp_path / "a.rumi", tmp_path / "a.rumih", thumbnail=False)
    with pytest.raises(SearchError, match=r"item 'a' has no geometry .* build the catalogue with index=False"):
        build_catalog([item], tmp_path / "stac")
    assert not (tmp_path / "stac").exists() or not any((tmp_path / "stac").iterdir())
    build_catalog([item], tmp_path / "stac", index=False)
    assert [h.id for h in search(tmp_path / "stac", datetime="2021-01")] == ["a"]


def test_copied_tree_still_reads(catalogue: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(catalogue.parent, copy)
    shutil.rmtree(catalogue.parent)
    hits = search(copy / "stac", datetime="2021-06-01/2021-06-30")
    assert [h.id for h in hits] == ["s2_jun"]
    assert hits[0].data_href == str(copy / "s2_jun.rumi")
    with Cube.open(hits[0].item_href) as c:  # type: ignore[arg-type]
        assert c.read(bands="red", times=[0], window=((0, 5), (0, 5))).data.shape == (1, 1, 5, 5)


def test_index_search_on_bbox_datetime_and_bands(catalogue: Path) -> None:
    inside = (14.99, 36.13, 15.02, 36.15)
    assert {h.id for h in search(catalogue, bbox=inside)} == {"s2_jan", "s2_jun", "other_jan"}
    assert search(catalogue, bbox=(0.0, 0.0, 1.0, 1.0)) == []
    assert {h.id for h in search(catalogue, bbox=inside, datetime="2021-01-01/2021-01-31")} == {"s2_jan", "other_jan"}
    assert {h.id for h in search(catalogue, datetime="2021-01-21")} == {"s2_jan", "other_jan"}
    assert [h.id for h in search(catalogue, bands=["coastal"])] == ["other_jan"]
    assert {h.id for h in search(catalogue, bands=["red", "nir"])} == {"s2_jan", "s2_jun", "other_jan"}
    assert len(search(catalogue / INDEX_NAME, limit=2)) == 2


def test_a_bbox_given_as_text_is_four_numbers_as_pystac_client_takes_it(catalogue: Path) -> None:
    """``bbox="14.99,36.13,15.02,36.15"`` was iterated by character and refused as ['1', '4', '.', …]."""
    inside = (14.99, 36.13, 15.02, 36.15)
    assert {h.id for h in search(catalogue, bbox="14.99, 36.13,15.02,36.15")} == {h.id for h in search(catalogue, bbox=inside)}
    with pytest.raises(CatalogError, match=re.escape("a bbox is four numbers minx,miny,maxx,maxy (or six, with minz and maxz")):
        search(catalogue, bbox="a,b,c,d")
    with pytest.raises(CatalogError, match=re.escape("got (None, 0, 1, 1)")):
        search(catalogue, bbox=(None, 0, 1, 1))  # type: ignore[arg-type]


def test_a_limit_bounds_the_rows_an_index_search_makes_items_of(catalogue: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a bbox or bands to filter by afterwards, the index query stops at ``limit`` rows: every match was made an
    item and checked first (4.5 s for ``--limit 1`` over 12,000 items), then all but one dropped. The hits are the first
    ones in index order, as without the limit."""
    import stac_geoparquet.arrow

    made: list[int] = []
    convert = stac_geoparquet.arrow.stac_table_to_items

    def counting(table: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(table.num_rows)
        return convert(table, *args, **kwargs)

    monkeypatch.setattr(stac_geoparquet.arrow, "stac_table_to_items", counting)
    every = [h.id for h in search(catalogue)]
    assert made == [3]
    assert [h.id for h in search(catalogue, limit=2)] == every[:2] and made == [3, 2]
    assert [h.id for h in search(catalogue, datetime="2021-01-21", limit=1)] == [h.id for h in search(catalogue, datetime="2021-01-21")][:1]
    assert [h.id for h in search(catalogue, bands=["coastal"], limit=1)] == ["other_jan"]  # bands filter after the query


def test_bbox_inside_the_item_bbox_but_outside_its_geometry_is_refined_away(tmp_path: Path) -> None:
    from catalog.index import query_index, read_index_table, write_index

    triangle = {"type": "Polygon", "coordinates": [[[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [0.0, 0.0]]]}
    item = {
        "type": "Feature",
        "stac_version": "1.1.0",
        "id": "triangle",
        "geometry": triangle,
        "bbox": [0.0, 0.0, 10.0, 10.0],
        "properties": {"datetime": "2021-01-01T00:00:00Z"},
        "links": [],
        "assets": {},
    }
    table = read_index_table(write_index([item], tmp_path / INDEX_NAME))
    assert [it["id"] for it in query_index(table, bbox=(1.0, 1.0, 2.0, 2.0))] == ["triangle"]
    assert query_index(table, bbox=(8.0, 8.0, 9.0, 9.0)) == []  # in the bbox, not in the triangle
    assert query_index(table, time=TimeRange.parse("2021-01-02/..")) == []


def test_walk_without_index(catalogue: Path) -> None:
    (catalogue / INDEX_NAME).unlink()
    hits = search(catalogue / "catalog.json", datetime="2021-06-01/..")
    assert [h.id for h in hits] == ["s2_jun"]
    assert hits[0].item_href is not None and hits[0].item_href.endswith("s2_jun.json")


def test_a_remote_catalogue_without_index_is_walked(catalogue: Path, tmp_path: Path, gcs_upload: Any) -> None:
    """As a local one is: the index looked for beside the root answers 404, and the items are read one by one.
    A root that links an index which is not there is walked too, as a local one is."""
    import json

    from catalog.testing import RangeRequestServer

    (catalogue / INDEX_NAME).unlink()
    with RangeRequestServer(tmp_path / "data") as srv:
        hits = search(srv.url("stac/catalog.json"), datetime="2021-06-01/..")
    assert [h.id for h in hits] == ["s2_jun"] and hits[0].item_href is not None
    root = json.loads((catalogue / "catalog.json").read_text())
    assert any(link["rel"] == "alternate" for link in root["links"])  # it still links the index removed
    for path in sorted(p for p in (tmp_path / "data").rglob("*") if p.is_file()):
        url = gcs_upload(path, f"walked/{path.relative_to(tmp_path / 'data').as_posix()}")
    prefix = url[: url.index("/walked/")] + "/walked/stac/"
    assert [h.id for h in search(prefix, datetime="2021-06-01/..")] == ["s2_jun"]


def test_remote_index_over_http(catalogue: Path, tmp_path: Path) -> None:
    from catalog.testing import RangeRequestServer

    with RangeRequestServer(tmp_path / "data") as srv:
        hits = search(srv.url("stac/catalog.json"), datetime="2021-06-01/..")
        assert [h.id for h in hits] == ["s2_jun"]
        assert hits[0].data_href == srv.url("s2_jun.rumi")
        assert hits[0].inline_header
        assert [r.path for r in srv.served] == ["/stac/catalog.json", f"/stac/{INDEX_NAME}"]


def test_a_static_catalogue_over_http_by_its_folder(catalogue: Path, tmp_path: Path) -> None:
    """Its folder's URL is no STAC API: the catalog.json in it is searched, as a local folder's is."""
    from catalog.testing import RangeRequestServer

    with RangeRequestServer(tmp_path / "data") as srv:
        for folder in ("stac", "stac/"):
            assert [h.id for h in search(srv.url(folder), datetime="2021-06-01/..")] == ["s2_jun"]
        with pytest.raises(SearchError, match=r"searching the STAC API at .* failed: .*; nor is it the folder of a static catalogue"):
            search(srv.url("nothing/"))


def test_a_web_servers_error_page_is_named_not_quoted(tmp_path: Path) -> None:
    """pystac-client's error is the answer's body: a web server's whole 404 page went into the one line."""
    import functools
    import http.server
    import threading

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *args: None  # type: ignore[method-assign]
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            with pytest.raises(SearchError) as caught:
                search(f"http://127.0.0.1:{server.server_address[1]}/nothing/")
        finally:
            server.shutdown()
    message = str(caught.value)
    assert "failed: HTTP 404, a web page; nor is it the folder of a static catalogue" in message and "<" not in message, message


def test_hit_round_trip(catalogue: Path) -> None:
    hit = search(catalogue)[0]
    assert SearchHit.from_dict(hit.to_dict()) == hit


def test_search_command_json_and_table(catalogue: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["search", str(catalogue), "--bbox", "14.99,36.13,15.02,36.15", "--datetime", "2021-06-01/..", "--json"])
    assert result.exit_code == 0, result.output
    got = json.loads(result.output)
    assert [h["id"] for h in got] == ["s2_jun"]
    assert got[0]["bands"] == ["B2", "B3", "B4", "B8"] and got[0]["start"] == "2021-06-01T00:00:00Z"
    table = runner.invoke(cli, ["search", str(catalogue), "--bands", "coastal"])
    assert table.exit_code == 0
    assert "other_jan" in table.output and "s2_jan" not in table.output


def test_an_empty_band_list_and_a_limit_past_int64_are_usage_errors(catalogue: Path) -> None:
    """``--bands ''`` matched every cube (rumi read refuses it), and a limit DuckDB cannot hold was its internal error."""
    runner = CliRunner()
    for bands in ("", ","):
        result = runner.invoke(cli, ["search", str(catalogue), "--bands", bands])
        assert result.exit_code == 2 and "names no band" in result.output, result.output
    huge = runner.invoke(cli, ["search", str(catalogue), "--limit", str(2**70)])
    assert huge.exit_code == 2 and "--limit" in huge.output and "Conversion Error" not in huge.output, huge.output


def test_the_table_quotes_a_band_name_that_holds_a_comma(tmp_path: Path, make_cube: Callable[..., Any]) -> None:
    """rumi convert names bands by their whole text: joined by bare commas, where one band ended was lost."""
    cube = make_cube(tmp_path, "texts")
    names = [{"name": "B2, Blue, 490nm"}, {"name": "B3"}, {"name": "B4, Red, 665nm"}, {"name": "B8"}]
    build_catalog([create_item(cube.path, cube.blob_path, extra={"bands": names}, thumbnail=False)], tmp_path / "stac")
    table = CliRunner().invoke(cli, ["search", str(tmp_path / "stac")])
    assert table.exit_code == 0, table.output
    assert '"B2, Blue, 490nm",B3,"B4, Red, 665nm",B8' in table.output


def test_one_band_name_is_a_text_and_datetime_a_text_or_range(catalogue: Path) -> None:
    """A text is one band name, as in :func:`catalog.load` (it was taken letter by letter, and found no hit); a datetime of
    another type is a :class:`SelectorError` naming the forms (an AttributeError before)."""
    import datetime as dt

    assert [h.id for h in search(catalogue, bands="coastal")] == [h.id for h in search(catalogue, bands=["coastal"])] == ["other_jan"]
    with pytest.raises(SelectorError, match="datetime is a datetime: give 'A/B' text"):
        search(catalogue, datetime=dt.datetime(2021, 6, 1))  # type: ignore[arg-type]
    with pytest.raises(SearchError, match=r"limit is a number of hits, at least 1 \(None for all\), got -1"):
        search(catalogue, limit=-1)  # it returned no hit


def test_search_errors(catalogue: Path, tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text("not json")
    with pytest.raises(SearchError, match=r"x\.json is not JSON"):
        search(tmp_path / "x.json")
    result = CliRunner().invoke(cli, ["search", str(catalogue), "--bbox", "1,2,3"])
    assert result.exit_code == 2 and "four numbers" in result.output
    missing = CliRunner().invoke(cli, ["search", str(tmp_path / "none")])
    assert missing.exit_code == 1 and missing.output.count("none") == 1  # named once: "Error: …/none: cannot read: …"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.__setitem__("properties", [1]), "item 's2_jun': properties is a list, not an object"),
        (lambda d: d["properties"].__setitem__("start_datetime", "yesterday"), "item 's2_jun': 'yesterday' is not an ISO 8601"),
        (lambda d: d["assets"]["data"].__setitem__("bands", [5]), r"item 's2_jun': assets.data.bands\[0\] is a number, not an object"),
        (lambda d: d.__setitem__("links", [{"rel": "root", "href": 5}]), r"item 's2_jun': links\[0\].href is a number, not a text"),
        (lambda d: d.clear(), "s2_jun.json is not JSON"),
    ],
)
def test_a_malformed_item_in_a_walked_catalogue_is_one_line_naming_it(catalogue: Path, change: Any, message: str) -> None:
    (catalogue / INDEX_NAME).unlink()
    (path,) = catalogue.rglob("s2_jun.json")
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc) if doc else "{not json")
    result = CliRunner().invoke(cli, ["search", str(catalogue), "--datetime", "2021-01-01/.."])
    assert result.exit_code == 1 and result.output.startswith("Error: ") and len(result.output.splitlines()) == 1, result.output
    assert re.search(message, result.output) and (str(path) in result.output or "s2_jun" in result.output), result.output


def test_an_index_of_other_columns_is_one_line(catalogue: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"foo": [1, 2]}), catalogue / INDEX_NAME)
    result = CliRunner().invoke(cli, ["search", str(catalogue)])
    assert result.exit_code == 1 and len(result.output.splitlines()) == 1, result.output
    assert "the index is not a stac-geoparquet table of items" in result.output


@pytest.mark.parametrize("column", ["start_datetime", "bbox", "geometry"])
def test_an_index_column_of_another_type_is_one_line(catalogue: Path, column: str) -> None:
    """A datetime of numbers, a bbox or geometry of texts: pyarrow, stac-geoparquet and shapely raised their own errors."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(catalogue / INDEX_NAME)
    table = table.set_column(table.column_names.index(column), column, pa.array([f"{column} {i}" for i in range(table.num_rows)]))
    if column == "start_datetime":
        table = table.set_column(table.column_names.index(column), column, pa.array(range(table.num_rows), pa.int64()))
    pq.write_table(table, catalogue / INDEX_NAME)
    for args in ([], ["--bbox", "-180,-90,180,90", "--datetime", "2000-01-01/2100-01-01"]):
        result = CliRunner().invoke(cli, ["search", str(catalogue), *args])
        assert result.exit_code == 1 and len(result.output.splitlines()) == 1, result.output
        assert "the index" in result.output and "Traceback" not in result.output
    with pytest.raises(SearchError, match="the index"):
        search(catalogue)


def test_build_catalog_refuses_duplicates(cube: Any, tmp_path: Path) -> None:
    item = create_item(cube.path, cube.blob_path, thumbnail=False)
    with pytest.raises(CatalogError, match="two items are called 'cube'"):
        build_catalog([item, item], tmp_path / "stac")


# -- a real STAC API over the catalogue ----------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def stac_api(catalogue: Path) -> Iterator[str]:
    """stac-fastapi-static serving the catalogue on 127.0.0.1, in a subprocess."""
    pytest.importorskip("stac_fastapi.static", reason="stac-fastapi-static is not installed (pip install -e '.[test]')")
    port = _free_port()
    env = {
        **os.environ,
        "CATALOG_HREF": str(catalogue / "catalog.json"),
        "APP_HOST": "127.0.0.1",
        "APP_PORT": str(port),
        "RELOAD": "false",
        "LOG_LEVEL": "error",
    }
    proc = subprocess.Popen([sys.executable, "-m", "stac_fastapi.static.app"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url + "/", timeout=1) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    pytest.fail(f"the STAC API did not start: {err[-2000:]}")
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stderr:
            proc.stderr.close()


def test_search_a_stac_api_with_pystac_client(stac_api: str) -> None:
    # stac-fastapi-static 1.0.1 answers nothing when bbox and datetime are combined, so each is tested alone.
    assert {h.id for h in search(stac_api, bbox=(14.99, 36.13, 15.02, 36.15))} == {"s2_jan", "s2_jun", "other_jan"}
    assert search(stac_api, bbox=(0.0, 0.0, 1.0, 1.0)) == []
    hits = search(stac_api, datetime="2021-06-01T00:00:00Z/2021-12-31T00:00:00Z")
    assert [h.id for h in hits] == ["s2_jun"]
    assert hits[0].data_href is not None and hits[0].data_href.endswith("s2_jun.rumi")
    assert hits[0].inline_header and hits[0].bands == ("B2", "B3", "B4", "B8")
    assert [h.id for h in search(stac_api, bands=["coastal"])] == ["other_jan"]


def test_a_box_across_the_antimeridian(tmp_path: Path) -> None:
    """STAC API bboxes cross 180° with minx > maxx: the index and a walked catalogue find cubes on both sides."""
    import numpy as np

    import rumi_core

    data = np.zeros((1, 1, 16, 16), dtype="uint16")
    items = []
    for name, crs, x in (("east", "EPSG:32660", 800000.0), ("west", "EPSG:32601", 200000.0)):  # about 179.7 E and 179.7 W
        path = tmp_path / f"{name}.rumi"
        blob = rumi_core.write(
            path, data, bands=["b"], times=["2021-01-01"], crs=crs, transform=(10.0, 0.0, x, 0.0, -10.0, 10000.0), tile_size=16
        )
        (tmp_path / f"{name}.rumih").write_bytes(blob)
        items.append(create_item(path, tmp_path / f"{name}.rumih", thumbnail=False))
    build_catalog(items, tmp_path / "stac", catalog_id="pacific", title="across 180")
    for walked in (False, True):
        if walked:
            (tmp_path / "stac" / INDEX_NAME).unlink()
        assert sorted(h.id for h in search(tmp_path / "stac", bbox=(179.0, -1.0, -179.0, 1.0))) == ["east", "west"]
        assert [h.id for h in search(tmp_path / "stac", bbox=(179.0, -1.0, 180.0, 1.0))] == ["east"]
        assert [h.id for h in search(tmp_path / "stac", bbox=(-180.0, -1.0, -179.0, 1.0))] == ["west"]
        assert search(tmp_path / "stac", bbox=(179.9, -1.0, -179.9, 1.0)) == []
    result = CliRunner().invoke(cli, ["search", str(tmp_path / "stac"), "--bbox", "179,-1,-179,1", "--json"])
    assert result.exit_code == 0, result.output
    assert sorted(hit["id"] for hit in json.loads(result.output)) == ["east", "west"]
    with pytest.raises(SearchError, match="empty or inverted"):
        search(tmp_path / "stac", bbox=(179.0, 1.0, -179.0, -1.0))
    for beyond in ((179.0, -1.0, 181.0, 1.0), (-181.0, -1.0, -179.0, 1.0), (179.0, -91.0, -179.0, 1.0)):
        with pytest.raises(SearchError, match="is not in degrees"):
            search(tmp_path / "stac", bbox=beyond)


def test_a_stac_api_that_never_answers_is_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """It accepts the connection and stays silent: each request waits STAC_API_TIMEOUT (here half a second, 60 s by default),
    where pystac-client would have waited for ever, and no static catalogue is then looked for behind it."""
    import importlib
    import socket
    import time

    module = importlib.import_module("catalog.search")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    monkeypatch.setattr(module, "STAC_API_TIMEOUT", (0.5, 0.5))
    start = time.monotonic()
    try:
        with pytest.raises(SearchError, match=r"searching the STAC API at .* failed: .*Read timed out") as caught:
            search(f"http://127.0.0.1:{listener.getsockname()[1]}/api")
    finally:
        listener.close()
    assert "static catalogue" not in str(caught.value) and time.monotonic() - start < 30


def test_timeout_bounds_a_stac_api_search_too() -> None:
    """``rumi search URL --timeout 2`` against an API that never answers waited 60 s for each of six tries (361 s):
    the command's deadline now bounds each request, and none is retried past it."""
    import socket
    import time

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    start = time.monotonic()
    try:
        result = CliRunner().invoke(cli, ["search", f"http://127.0.0.1:{listener.getsockname()[1]}/api", "--timeout", "2"])
    finally:
        listener.close()
    assert result.exit_code == 1 and "Read timed out" in result.output, result.output
    assert time.monotonic() - start < 30  # a guard against the minutes it took, not a timing


def test_a_stac_apis_relative_hrefs_resolve_against_its_urls(tmp_path: Path, make_cube: Callable[..., Any]) -> None:
    """An API's items are remote documents: '/data/x.rumi' is a path on the API's server (RFC 3986), '../x.rumih' is
    resolved against the item's URL (here the API's, as the item has no self link), and a file: URL is refused, never
    opened on this machine."""
    from catalog.testing import StaticStacApi

    cube = make_cube(tmp_path, "x")
    item = create_item(cube.path, cube.blob_path, data_href="/data/x.rumi", header_href="../x.rumih", thumbnail=False).to_dict()
    item["collection"] = "c"
    with StaticStacApi([item]) as api:
        root = api.url.rstrip("/")
        (hit,) = search(api.url)
        assert (hit.data_href, hit.header_href) == (f"{root}/data/x.rumi", f"{root}/x.rumih")
    item["assets"]["data"]["href"] = f"file://{cube.path}"
    with (
        StaticStacApi([item]) as api,
        pytest.raises(StorageError, match=r"names 'file://.*x\.rumi', a file on this machine, which a remote"),
    ):
        search(api.url)


def test_a_cube_of_intervals_is_not_found_after_its_last_interval_ends(tmp_path: Path) -> None:
    """Intervals are ``[start, end)`` and STAC's ``end_datetime`` is inclusive: a January-February cube answers no search for March."""
    import numpy as np

    import rumi_core

    path = tmp_path / "janfeb.rumi"
    times = [("2021-01-01", "2021-02-01"), ("2021-02-01", "2021-03-01")]
    data = np.zeros((2, 1, 16, 16), dtype="uint16")
    grid = {"crs": "EPSG:32633", "transform": (10.0, 0.0, 5e5, 0.0, -10.0, 4e6)}
    blob = rumi_core.write(path, data, bands=["b"], times=times, tile_size=16, **grid)
    (tmp_path / "janfeb.rumih").write_bytes(blob)
    item = create_item(path, tmp_path / "janfeb.rumih", thumbnail=False)
    assert item.properties["end_datetime"] == "2021-02-28T23:59:59Z"
    build_catalog([item], tmp_path / "stac")
    collection = json.loads(next((tmp_path / "stac").rglob("collection.json")).read_text())
    assert collection["extent"]["temporal"]["interval"] == [["2021-01-01T00:00:00Z", "2021-02-28T23:59:59Z"]]
    for walked in (False, True):
        if walked:
            (tmp_path / "stac" / INDEX_NAME).unlink()
        assert search(tmp_path / "stac", datetime="2021-03-01/2021-03-31") == []
        assert search(tmp_path / "stac", datetime="2021-03-01T00:00:00Z") == []
        assert [h.id for h in search(tmp_path / "stac", datetime="2021-02-28T23:59:59Z/..")] == ["janfeb"]
        assert [h.id for h in search(tmp_path / "stac", datetime="../2021-01-01")] == ["janfeb"]


def test_a_search_takes_a_point_a_six_number_box_and_a_year_as_stac_apis_do(catalogue: Path) -> None:
    """STAC API: a bbox of four or six numbers, which may be a point; ISO 8601's reduced precision: a year is that year."""
    inside = (15.0, 36.14)
    for walked in (False, True):
        if walked:
            (catalogue / INDEX_NAME).unlink()
        assert {h.id for h in search(catalogue, bbox=(*inside, *inside))} == {"s2_jan", "s2_jun", "other_jan"}
        assert search(catalogue, bbox=(1.0, 1.0, 1.0, 1.0)) == []
        with_heights = (14.99, 36.13, -10, 15.02, 36.15, 10)
        assert {h.id for h in search(catalogue, bbox=with_heights, datetime="../2021-01")} == {"s2_jan", "other_jan"}
        assert {h.id for h in search(catalogue, datetime="2021")} == {"s2_jan", "s2_jun", "other_jan"}
        assert search(catalogue, datetime="2022/..") == []
    result = CliRunner().invoke(cli, ["search", str(catalogue), "--bbox", "15,36.14,15,36.14", "--datetime", "../2021", "--json"])
    assert result.exit_code == 0 and len(json.loads(result.output)) == 3, result.output
    with pytest.raises(SearchError, match="empty or inverted: it needs minx <= maxx"):
        search(catalogue, bbox=(15.0, 36.15, 15.0, 36.14))
