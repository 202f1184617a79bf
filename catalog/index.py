"""The stac-geoparquet index of a catalogue, and queries on it with DuckDB.

The catalogue writer stores every item once more as a row of a
stac-geoparquet file (``items.parquet`` at the catalogue root), so a search
is one columnar scan instead of a walk over JSON files. In each row, asset
hrefs and the item's ``self`` link are relative to the index file, so the
index moves with the catalogue.

:func:`query_index` filters on the ``bbox`` struct column and the
``datetime``/``start_datetime``/``end_datetime`` columns with DuckDB (stock
DuckDB, no spatial extension, which cannot be downloaded offline), then
refines the candidates with shapely on their real geometry, and returns
the items as dicts.
"""

from __future__ import annotations

import datetime as dt
import io
import math
import os
from typing import TYPE_CHECKING, Any

from catalog.bands import stac_nodata
from catalog.errors import SearchError
from catalog.item_parts import item_problem
from catalog.json_shape import json_kind
from catalog.selectors import lonlat_boxes
from rumi_core.files import atomic_path

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    import pyarrow as pa

    from catalog.selectors import TimeRange

__all__ = ["INDEX_NAME", "query_index", "read_index_table", "write_index"]

INDEX_NAME = "items.parquet"
"""File name of the index at a catalogue root."""


_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _nodata_as(value: Any, *, to_number: bool) -> Any:
    """Rewrite every ``nodata`` in a nested item dict: STAC text to a float, or back.

    STAC 1.1 writes a non-finite no-data value as the text ``"nan"``,
    ``"inf"`` or ``"-inf"`` and a finite one as a number. One arrow column
    holds one type, so a catalogue mixing a NaN-nodata cube and a numeric one
    could not be indexed; the index stores every no-data value as a double
    (IEEE NaN and infinities included) and turns them back into STAC text
    when it returns items.
    """
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key == "nodata" and to_number and isinstance(item, str) and item.lower() in _NON_FINITE:
                out[key] = _NON_FINITE[item.lower()]
            elif key == "nodata" and to_number and isinstance(item, int) and not isinstance(item, bool):
                out[key] = float(item)
            elif key == "nodata" and not to_number:
                out[key] = stac_nodata(item)
            else:
                out[key] = _nodata_as(item, to_number=to_number)
        return out
    if isinstance(value, list):
        return [_nodata_as(item, to_number=to_number) for item in value]
    return value


def write_index(items: Iterable[dict[str, Any]], path: str | os.PathLike[str]) -> str:
    """Write item dicts as a stac-geoparquet file, atomically.

    No-data values are stored as doubles (see :func:`_nodata_as`).

    Returns:
        The path written.

    Raises:
        SearchError: the items cannot be converted.
    """
    from stac_geoparquet.arrow import parse_stac_items_to_arrow, to_parquet

    target = os.fspath(path)
    rows = [_nodata_as(item, to_number=True) for item in items]
    if not rows:
        raise SearchError("an index needs at least one item")
    try:
        with atomic_path(target) as tmp:
            to_parquet(parse_stac_items_to_arrow(rows), tmp)
    except (ValueError, TypeError, KeyError) as err:
        raise SearchError(f"cannot write the stac-geoparquet index {target}: {err}") from err
    return target


def read_index_table(data: bytes | str | os.PathLike[str]) -> pa.Table:
    """Load an index from a path or from its bytes.

    Raises:
        SearchError: the data is not a parquet file.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(io.BytesIO(data) if isinstance(data, bytes) else os.fspath(data))
    except (OSError, pa.ArrowInvalid) as err:
        raise SearchError(f"cannot read the stac-geoparquet index: {err}") from err


def _ts(seconds: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)


def query_index(
    table: pa.Table,
    *,
    bbox: Sequence[float] | None = None,
    time: TimeRange | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """Return the items of an index that meet a bounding box (lon/lat) and a time range.

    Args:
        table: The index, from :func:`read_index_table`.
        bbox: ``(minx, miny, maxx, maxy)`` in longitude/latitude (``minx > maxx``
            crosses the antimeridian); None for anywhere.
        time: Closed time range; None for any time.
        limit: Most items returned, in index order.

    Raises:
        SearchError: the query fails.
    """
    import duckdb
    import shapely
    from stac_geoparquet.arrow import stac_table_to_items

    try:
        columns = set(table.column_names)
    except UnicodeDecodeError as err:
        raise SearchError(f"the index is not a stac-geoparquet table of items: a column name is not UTF-8 text ({err})") from err
    where: list[str] = []
    params: list[Any] = []
    if bbox is not None:
        if "bbox" not in columns:
            return []
        boxes = lonlat_boxes(bbox)
        # An item's bbox across the antimeridian (xmin > xmax) covers xmin..180 and -180..xmax.
        side = (
            "((bbox.xmin <= bbox.xmax AND bbox.xmax >= ? AND bbox.xmin <= ?)"
            " OR (bbox.xmin > bbox.xmax AND (bbox.xmax >= ? OR bbox.xmin <= ?)))"
        )
        where.append(f"bbox IS NOT NULL AND bbox.ymax >= ? AND bbox.ymin <= ? AND ({' OR '.join([side] * len(boxes))})")
        params += [float(bbox[1]), float(bbox[3])] + [v for b in boxes for v in (b[0], b[2], b[0], b[2])]
    if time is not None:
        start_cols = [c for c in ("start_datetime", "datetime") if c in columns]
        end_cols = [c for c in ("end_datetime", "datetime") if c in columns]
        if not start_cols:
            return []
        item_start = f"coalesce({', '.join(start_cols)})" if len(start_cols) > 1 else start_cols[0]
        item_end = f"coalesce({', '.join(end_cols)})" if len(end_cols) > 1 else end_cols[0]
        if time.end is not None:
            where.append(f"{item_start} <= ?")
            params.append(_ts(time.end))
        if time.start is not None:
            where.append(f"{item_end} >= ?")
            params.append(_ts(time.start))
    sql = "SELECT * FROM items"
    if where:
        sql += " WHERE " + " AND ".join(f"({w})" for w in where)
    if limit is not None and bbox is None:  # with a bbox, the geometries below may drop rows the limit kept
        sql += " LIMIT ?"  # in index order: DuckDB keeps the insertion order of a scan (preserve_insertion_order)
        params.append(limit)
    con = duckdb.connect()
    try:
        con.register("items", table)
        result = con.sql(sql, params=params).to_arrow_table()
    except duckdb.Error as err:
        raise SearchError(f"the index query failed: {err}") from err
    finally:
        con.close()
    try:
        found = [_nodata_as(item, to_number=False) for item in stac_table_to_items(result)]
    # pyarrow's ArrowInvalid is a ValueError, ArrowNotImplementedError (a datetime column of numbers) a
    # NotImplementedError; stac-geoparquet asserts the bbox column's type, and shapely refuses geometry it cannot parse.
    except (ValueError, KeyError, TypeError, AttributeError, NotImplementedError, AssertionError, shapely.errors.ShapelyError) as err:
        what = str(err) or f"stac-geoparquet refused its columns ({type(err).__name__})"
        raise SearchError(f"the index is not a stac-geoparquet table of items: {what}") from err
    for item in found:
        problem = item_problem(item) if isinstance(item.get("id"), str) else f"an item's id is {json_kind(item.get('id'))}, not a text"
        if problem is not None:
            raise SearchError(f"the index holds a malformed item: {problem}")
    if bbox is not None:
        shapes = [shapely.box(*b) for b in lonlat_boxes(bbox)]
        found = [
            it for it in found if it.get("geometry") is None or any(shapely.geometry.shape(it["geometry"]).intersects(b) for b in shapes)
        ]
    return found[:limit] if limit is not None else found
