"""The ``rumi:`` STAC fields: how a rumi file is stored, on its item.

A STAC item of a rumi file carries, besides the standard projection,
datacube, file and EO fields, a few properties that only make sense for rumi.
They are prefixed ``rumi:`` and declared by the extension schema
:data:`SCHEMA_URI`, which ships in this package
(``catalog/schemas/rumi/v0.2.0/schema.json``) and is used offline by
:mod:`catalog.validation`. Items written by earlier versions declare
:data:`SCHEMA_URI_V0_1`, whose schema ships too: they differ in one meaning,
``proj:transform`` of a PixelIsPoint item (see :meth:`catalog.grid.Grid.from_dict`).

========================  ==================================================
``rumi:version``          the rumi specification version, ``"0.1.0"``
``rumi:frame_unit``       the ``frame_unit`` value (0..9)
``rumi:frame_axes``       axes of a decoded frame, such as ``"hw"`` or ``"tbhw"``
``rumi:tile_size``        nominal ``[tile_length, tile_width]``
``rumi:time_type``        ``"instant"`` or ``"interval"``
``rumi:codec``            the compression graph (``{"name", "configuration"}``), if known
``rumi:lossy_bound``      the error bound of a lossy graph, absent when lossless
``rumi:dataset``          the dataset the cube belongs to (groups collections)
``rumi:pixel_is_point``   true when the file's transform locates pixel centres
``rumi:vertical_crs``     the vertical CRS of height values (``"EPSG:3855"``)
``rumi:header``           the header blob, base64, when it is at most 4 KiB
``rumi:header_checksum``  multihash SHA2-256 of the header blob, inline or not
========================  ==================================================

On the ``data`` asset of a file in a bucket, ``rumi:crc32c`` records the
CRC-32C (Castagnoli) that GCS reports for the object, as 8 lowercase hex
digits: there ``file:checksum`` (a SHA-256 multihash) is left out, since
computing it would download the whole cube.

>>> f = RumiFields(frame_unit=0, frame_axes="hw", tile_size=(512, 512), time_type="instant", header=b"LOVE")
>>> f.to_dict()["rumi:header"]
'TE9WRQ=='
>>> RumiFields.from_dict(f.to_dict()) == f
True
"""

from __future__ import annotations

import base64
import binascii
import numbers
import re
from dataclasses import dataclass
from typing import Any

from catalog.errors import ItemError

__all__ = ["INLINE_HEADER_LIMIT", "SCHEMA_URI", "SCHEMA_URI_V0_1", "TIME_TYPES", "VERTICAL_CRS", "RumiFields", "schema_path"]

SCHEMA_URI = "https://rumi-forge.github.io/stac-extension/v0.2.0/schema.json"
"""Identifier of the ``rumi:`` extension schema (a copy ships in this package)."""

SCHEMA_URI_V0_1 = "https://rumi-forge.github.io/stac-extension/v0.1.0/schema.json"
"""The schema earlier items declare: there a PixelIsPoint item's ``proj:transform`` is its file's, of pixel centres."""

INLINE_HEADER_LIMIT = 4096
"""Largest header blob, in bytes, that an item carries inline."""

VERTICAL_CRS = "rumi:vertical_crs"
"""The property naming the vertical CRS of a cube's height values (``"EPSG:3855"``), where its source's CRS was
compound or 3D: the file, like ``proj:code``, holds the horizontal CRS only (specification, "Georeferencing")."""

TIME_TYPES = ("instant", "interval")
"""The values of ``rumi:time_type``."""

_SHA256_MULTIHASH = re.compile(r"1220[0-9a-f]{64}")


def schema_path(uri: str = SCHEMA_URI) -> str:
    """Return the local path of a ``rumi:`` extension schema, :data:`SCHEMA_URI` or :data:`SCHEMA_URI_V0_1`."""
    from importlib.resources import files

    version = uri.rsplit("/", 2)[-2]
    return str(files("catalog").joinpath("schemas", "rumi", version, "schema.json"))


@dataclass(frozen=True)
class RumiFields:
    """The ``rumi:`` properties of one item."""

    frame_unit: int
    """``frame_unit`` (tag 65000)."""
    frame_axes: str
    """Axes of a decoded frame, outermost first."""
    tile_size: tuple[int, int]
    """``(tile_length, tile_width)``."""
    time_type: str
    """``"instant"`` or ``"interval"``."""
    codec: dict[str, Any] | None = None
    """The compression graph, ``{"name": ..., "configuration": {...}}``."""
    lossy_bound: float | dict[str, Any] | None = None
    """The error bound of a lossy graph; None when lossless."""
    dataset: str | None = None
    """Dataset name, used to group items into collections."""
    header: bytes | None = None
    """The header blob, when small enough to carry inline."""
    header_checksum: str | None = None
    """Multihash SHA2-256 (``"1220"`` + hex) of the header blob: a reader
    verifies the blob it uses against it, since the format itself cannot tell a
    changed byte count from a true one."""
    version: str = "0.1.0"
    """The rumi specification version of the file."""

    def __post_init__(self) -> None:
        if not isinstance(self.frame_unit, int) or not 0 <= self.frame_unit <= 9:
            raise ItemError(f"rumi:frame_unit is 0..9, got {self.frame_unit!r}")
        if self.time_type not in TIME_TYPES:
            raise ItemError(f"rumi:time_type is 'instant' or 'interval', got {self.time_type!r}")
        if self.header is not None and len(self.header) > INLINE_HEADER_LIMIT:
            raise ItemError(f"an inline header blob is at most {INLINE_HEADER_LIMIT} bytes, got {len(self.header)}")
        if self.header_checksum is not None and not _SHA256_MULTIHASH.fullmatch(self.header_checksum):
            raise ItemError(f"rumi:header_checksum is '1220' and 64 lowercase hex digits, got {self.header_checksum!r}")
        size = tuple(self.tile_size)
        if len(size) != 2 or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and 1 <= v <= 65535 for v in size):
            raise ItemError(f"rumi:tile_size is [tile_length, tile_width], two integers 1..65535, got {list(size)!r}")
        object.__setattr__(self, "tile_size", tuple(int(v) for v in size))

    def to_dict(self) -> dict[str, Any]:
        """Return the item properties, every key prefixed ``rumi:``."""
        out: dict[str, Any] = {
            "rumi:version": self.version,
            "rumi:frame_unit": self.frame_unit,
            "rumi:frame_axes": self.frame_axes,
            "rumi:tile_size": list(self.tile_size),
            "rumi:time_type": self.time_type,
        }
        optional = {
            "rumi:codec": self.codec,
            "rumi:lossy_bound": self.lossy_bound,
            "rumi:dataset": self.dataset,
            "rumi:header": base64.b64encode(self.header).decode("ascii") if self.header is not None else None,
            "rumi:header_checksum": self.header_checksum,
        }
        out.update((key, value) for key, value in optional.items() if value is not None)
        return out

    @classmethod
    def from_dict(cls, properties: dict[str, Any]) -> RumiFields:
        """Read the ``rumi:`` fields of item properties (other keys are ignored).

        Raises:
            ItemError: a required field is missing or a value is malformed.
        """
        try:
            header_text = properties.get("rumi:header")
            header = base64.b64decode(header_text, validate=True) if header_text is not None else None
            return cls(
                frame_unit=properties["rumi:frame_unit"],
                frame_axes=properties["rumi:frame_axes"],
                tile_size=tuple(properties["rumi:tile_size"]),
                time_type=properties["rumi:time_type"],
                codec=properties.get("rumi:codec"),
                lossy_bound=properties.get("rumi:lossy_bound"),
                dataset=properties.get("rumi:dataset"),
                header=header,
                header_checksum=properties.get("rumi:header_checksum"),
                version=properties.get("rumi:version", "0.1.0"),
            )
        except KeyError as err:
            raise ItemError(f"the item has no {err.args[0]} property; it was not written by the rumi catalogue") from err
        except (binascii.Error, ValueError, TypeError) as err:
            if isinstance(err, ItemError):
                raise
            raise ItemError(f"malformed rumi: property: {err}") from err
