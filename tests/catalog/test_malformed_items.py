"""Items that are not the shape STAC gives them: ``rumi read`` and ``rumi export`` fail with one line naming the field."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from catalog.items import create_item
from rumi_core.cli.main import cli

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change that sets the field at the dotted ``path`` (list indices as digits) of an item to ``value``."""

    def change(item: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = item
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return change


CASES = [
    ("properties", [1], "properties is a list, not an object"),
    ("assets", [1], "assets is a list, not an object"),
    ("links", 5, "links is a number, not a list"),
    ("assets.data.href", 5, "assets.data.href is a number, not a text"),
    ("assets.header", None, "assets.header is missing, not an object"),
    ("assets.data.bands", "red", "assets.data.bands is a text, not a list"),
    ("assets.data.bands.0", 5, r"assets.data.bands\[0\] is a number, not an object"),
    ("assets.data.bands.0.scale", "big", "band 'B2': scale is a text, not a number"),
    ("assets.data.bands.0.nodata", "zero", "band 'B2': nodata is 'zero', not a number or one of nan, inf, -inf"),
    ("assets.data.bands.0.name", 7, "band 7: name is a number, not a text"),
    ("properties.cube:dimensions", [1], "properties.cube:dimensions is a list, not an object"),
    ("properties.cube:dimensions.time", 5, "properties.cube:dimensions.time is a number, not an object"),
    ("properties.cube:dimensions.time.values", [5], r"properties.cube:dimensions.time.values\[0\] is a number, not a text"),
    ("properties.rumi:time_type", "sometimes", "rumi:time_type is 'sometimes', not 'instant' or 'interval'"),
    ("properties.rumi:tile_size", [0, -1], r"rumi:tile_size is \[tile_length, tile_width\], two integers 1..65535"),
    ("properties.proj:code", "EPSG:abc", "a CRS is 'EPSG:' and a code, got 'EPSG:abc'"),
    ("properties.proj:code", "EPSG:0", r"the CRS EPSG:0 is not in the EPSG registry \(PROJ's database\)"),  # a CRSError traceback
    ("properties.proj:code", "EPSG:999999", r"the CRS EPSG:999999 is not in the EPSG registry"),
    ("properties.proj:transform", [0, 0, 0, 0, 0, 0], r"maps it to a point or a line \(a\*e - b\*d is 0\)"),  # not invertible
    ("properties.proj:transform", [10, 20, 0, 5, 10, 0], r"maps it to a point or a line"),
    ("properties.proj:shape", [64.5, 64], r"proj:shape is \[rows, columns\], two integers, got \[64.5, 64\]"),  # was 64 rows
    ("properties.proj:shape", ["64", "64"], r"proj:shape is \[rows, columns\], two integers, got \['64', '64'\]"),
    ("properties.proj:transform", ["10", 0, 0, 0, -10, 0], r"proj:transform is six \(or nine\) numbers, got \['10', "),
    # Integers past a double's range, as JSON may write them: float() raised OverflowError.
    ("assets.data.bands.0.offset", 10**400, "band 'B2': offset is a number past a double's range, not a number"),
    ("properties.proj:shape", [10**400, 64], r"proj:shape is \[rows, columns\], two integers, got \[1000"),
    ("properties.proj:transform", [10, 0, 0, 0, -(10**400), 0], r"proj:transform is six \(or nine\) numbers, got \[10, "),
    ("properties.rumi:vertical_crs", 5, "rumi:vertical_crs is a number, not a text"),
    ("properties.rumi:vertical_crs", "EPSG:99999", "rumi:vertical_crs is EPSG:99999, which is not in the EPSG registry"),
]


@pytest.mark.parametrize("command", ["read", "export"])
@pytest.mark.parametrize(("field", "value", "message"), CASES, ids=[f"{c[0]}={c[1]!r}" for c in CASES])
def test_a_malformed_item_is_one_line_naming_its_field(
    cube: Any, tmp_path: Path, command: str, field: str, value: Any, message: str
) -> None:
    item = create_item(cube.path, cube.blob_path, data_href="cube.rumi", header_href="cube.rumih", thumbnail=False)
    doc = item.to_dict(include_self_link=False)
    doc["properties"].pop("rumi:header")  # the blob comes from the header asset, whose shape is checked too
    _set(field, value)(doc)
    path = cube.path.parent / "item.json"
    path.write_text(json.dumps(doc))
    result = CliRunner().invoke(cli, [command, str(path), "--output", str(tmp_path / "out.tif")])
    assert result.exit_code == 1, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"Error: {path}: ") and re.search(message, line), line
    assert not (tmp_path / "out.tif").exists()


def test_projection_fields_may_be_tuples_and_numpy_numbers(cube: Any) -> None:
    """pystac keeps what it is given, and ``ProjectionExtension.ext(item).shape = ds.shape`` gives a tuple, NumPy
    arrays' shapes and transforms NumPy numbers: each is the integers or numbers the schema reads."""
    import numpy as np

    from catalog.grid import Grid

    props = create_item(cube.path, cube.blob_path, thumbnail=False).to_dict()["properties"]
    expected = Grid.from_dict(props)
    for shape, transform in [
        (tuple(props["proj:shape"]), tuple(props["proj:transform"])),
        ([np.int64(v) for v in props["proj:shape"]], [np.float64(v) for v in props["proj:transform"]]),
        ([float(v) for v in props["proj:shape"]], props["proj:transform"]),  # 64.0 is an integer to JSON Schema
    ]:
        assert Grid.from_dict({**props, "proj:shape": shape, "proj:transform": transform}) == expected


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([1], "is neither a rumi file nor a STAC item: it is a list, not an object"),
        ({"type": "FeatureCollection", "features": 5}, "features is a number, not a list"),
    ],
)
def test_a_document_that_is_no_item_is_one_line(tmp_path: Path, document: Any, message: str) -> None:
    path = tmp_path / "item.json"
    path.write_text(json.dumps(document))
    result = CliRunner().invoke(cli, ["read", str(path), "--output", str(tmp_path / "out.tif")])
    assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output, result.output


@pytest.mark.parametrize("command", ["read", "search", "catalog"])
def test_json_nested_deeper_than_the_parser_goes_is_one_line(tmp_path: Path, command: str) -> None:
    """Python's parser gives up on deep nesting with a RecursionError, which every reader showed as a traceback."""
    deep = '{"type": "Feature", "properties": ' + "[" * 100_000 + "]" * 100_000 + "}"
    path = tmp_path / ("catalog.json" if command != "read" else "item.json")
    path.write_text(deep)
    args = {
        "read": ["read", str(path), "--output", str(tmp_path / "out.npy")],
        "search": ["search", str(path)],
        "catalog": ["read", "--catalog", str(path), "--bbox", "10,50,11,51", "--output", str(tmp_path / "out.npy")],
    }[command]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "nest deeper than Python's parser goes" in result.output and str(path) in result.output, result.output
