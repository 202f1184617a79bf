"""Blob integrity: an item records its header blob's checksum, and item-based reads verify it.

A blob with a byte count changed is still a valid blob, and when the change
lands a frame's offset on a neighbouring frame of the same size, a windowed
read decodes it to the wrong pixels without any error: the format cannot
notice. The item can, with ``rumi:header_checksum`` (and the ``file:checksum``
of its header asset). The tests change a blob by swapping two counts.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from catalog.cube import Cube
from catalog.errors import ChecksumError
from catalog.items import create_item
from rumi_core.header import HeaderBlob
from rumi_core.testing import BlobParts

if TYPE_CHECKING:
    from pathlib import Path

    from catalog.testing import RangeRequestServer


def swapped_counts(blob: bytes) -> bytes:
    """The blob with the first two different neighbouring byte counts swapped."""
    counts = [int(c) for c in HeaderBlob.from_bytes(blob).frame_byte_counts]
    i = next(i for i in range(len(counts) - 1) if counts[i] != counts[i + 1])
    counts[i], counts[i + 1] = counts[i + 1], counts[i]
    return BlobParts.from_bytes(blob, counts).to_bytes()


def write_item(cube: Any, *, inline: bool) -> dict[str, Any]:
    limit = 4096 if inline else 0
    item = create_item(
        cube.path, cube.blob_path, data_href="cube.rumi", header_href="cube.rumih", thumbnail=False, inline_header_limit=limit
    )
    doc: dict[str, Any] = item.to_dict(include_self_link=False)
    (cube.dir / "item.json").write_text(json.dumps(doc))
    return doc


def test_the_item_records_the_blob_checksum(cube: Any) -> None:
    doc = write_item(cube, inline=False)
    expected = "1220" + hashlib.sha256(cube.blob).hexdigest()
    assert doc["properties"]["rumi:header_checksum"] == expected
    assert doc["assets"]["header"]["file:checksum"] == expected


@pytest.mark.parametrize("inline", [True, False])
def test_an_item_read_refuses_a_changed_blob(cube: Any, inline: bool) -> None:
    doc = write_item(cube, inline=inline)
    with Cube.open(cube.dir / "item.json") as c:
        np.testing.assert_array_equal(c.read(bands=[0], times=[0]).data, cube.data[[0]][:, [0]])
    tampered = swapped_counts(cube.blob)
    if inline:
        doc["properties"]["rumi:header"] = base64.b64encode(tampered).decode("ascii")
        (cube.dir / "item.json").write_text(json.dumps(doc))
    else:
        cube.blob_path.write_bytes(tampered)
    with pytest.raises(ChecksumError, match=r"the header blob's SHA2-256 multihash is 1220[0-9a-f]{64}, but rumi:header_checksum records"):
        Cube.open(cube.dir / "item.json")


def test_a_blob_given_with_an_item_is_verified_too(cube: Any) -> None:
    write_item(cube, inline=False)
    with pytest.raises(ChecksumError):
        Cube.open(cube.dir / "item.json", header=swapped_counts(cube.blob))
    with pytest.raises(ChecksumError):
        Cube.open(cube.dir / "item.json", header=HeaderBlob.from_bytes(swapped_counts(cube.blob)))


def test_a_header_asset_checksum_alone_is_verified(cube: Any) -> None:
    """Items that only carry file:checksum on the header asset are verified against it."""
    doc = write_item(cube, inline=False)
    del doc["properties"]["rumi:header_checksum"]
    (cube.dir / "item.json").write_text(json.dumps(doc))
    cube.blob_path.write_bytes(swapped_counts(cube.blob))
    with pytest.raises(ChecksumError, match="the header asset's file:checksum records"):
        Cube.open(cube.dir / "item.json")


def test_a_remote_item_read_verifies_the_blob(cube: Any, server: RangeRequestServer, tmp_path: Path) -> None:
    write_item(cube, inline=False)
    cube.blob_path.write_bytes(swapped_counts(cube.blob))
    with pytest.raises(ChecksumError):
        Cube.open(server.url("item.json"))
