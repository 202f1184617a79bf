"""Scenes: one input raster file and what the pipeline knows about it.

A :class:`SceneRef`
is what discovery finds: a path or URL, plus what a STAC item says about it. A
:class:`Scene` is what reading its metadata adds: grid, shape, dtype, nodata,
bands and acquisition time. Both are immutable and picklable, and both have a
symmetric ``to_dict``/``from_dict`` pair so a run can record them as JSON.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from catalog.bands import stac_nodata
from catalog.grid import Grid
from pipelines.planning.lattice import OnGrid
from pipelines.planning.plan import CubeBand

__all__ = ["ProductBand", "Radiometry", "Scene", "SceneRef", "SourceBand", "nodata_key"]

Radiometry = tuple[float, float, str | None]
"""``(scale, offset, unit)`` of a band's stored values, as product metadata or a STAC asset declares them."""


def nodata_key(nodata: float | None) -> str:
    """A text that compares nodata values exactly, NaN included (``"none"``, ``"nan"``, ``"-9999.0"``)."""
    if nodata is None:
        return "none"
    return "nan" if math.isnan(nodata) else repr(float(nodata))


@dataclass(frozen=True)
class ProductBand:
    """What a product-aware discovery (such as :mod:`pipelines.sentinel2`) knows better than a single-band file.

    The file's own band description, scale, offset and nodata give way to
    these, and the scene joins a *family*: scenes of different families never
    share a cube, and a cube of one family is named ``<family>_<period>``, so a
    rewritten period keeps its name (and its catalogue item).
    """

    name: str
    """The band text stored in the trailer."""
    scale: float
    """Scale to physical values."""
    offset: float
    """Offset to physical values."""
    nodata: float | None
    """Nodata value of the band."""
    family: str
    """Cube family, e.g. ``S2L2A_T33UUU_20m``."""
    tags: tuple[tuple[str, str], ...] = ()
    """``(key, value)`` facts about the acquisition (platform, processing baseline...); a cube records the union of its scenes'."""
    replaces: tuple[str, ...] = ()
    """Hrefs of this band in older processings of the acquisition that discovery left out; its cube lists them as dropped."""
    categorical: bool = False
    """Whether the values are classes (Sentinel-2's scene classification), which a reader never interpolates."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "name": self.name,
            "scale": self.scale,
            "offset": self.offset,
            "nodata": stac_nodata(self.nodata),
            "family": self.family,
            "tags": [list(t) for t in self.tags],
            "replaces": list(self.replaces),
            "categorical": self.categorical,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProductBand:
        """Inverse of :meth:`to_dict`."""
        nodata = data.get("nodata")
        return cls(
            data["name"],
            data["scale"],
            data["offset"],
            None if nodata is None else float(nodata),
            data["family"],
            tuple((k, v) for k, v in data.get("tags", ())),
            tuple(data.get("replaces", ())),
            bool(data.get("categorical", False)),
        )


@dataclass(frozen=True)
class SceneRef:
    """An input raster found by discovery."""

    href: str
    """Local path (absolute) or URL (``https://``, ``gs://``) that rasterio opens."""
    time: str | None = None
    """Acquisition time from a STAC item, ISO 8601."""
    stack: str | None = None
    """Acquisition id from a STAC item: assets of one item are bands of one acquisition."""
    band_names: tuple[str, ...] | None = None
    """Band names from the STAC asset (``eo:bands`` names, else the asset key)."""
    product: ProductBand | None = None
    """Set by a product-aware discovery for a single-band file: its text, radiometry, nodata and cube family."""
    band_radiometry: tuple[Radiometry | None, ...] | None = None
    """Per band, the radiometry the STAC asset states (``raster:bands``, or STAC 1.1 ``bands``); None where it states none."""
    nodata: float | None = None
    """The no-data value the STAC asset states for all its bands (``raster:bands``, or STAC 1.1 ``nodata``)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "href": self.href,
            "time": self.time,
            "stack": self.stack,
            "band_names": list(self.band_names) if self.band_names else None,
            "product": self.product.to_dict() if self.product else None,
            "band_radiometry": [list(r) if r else None for r in self.band_radiometry] if self.band_radiometry else None,
            "nodata": stac_nodata(self.nodata),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SceneRef:
        """Inverse of :meth:`to_dict`."""
        names = data.get("band_names")
        product = data.get("product")
        radiometry = data.get("band_radiometry")
        return cls(
            data["href"],
            data.get("time"),
            data.get("stack"),
            tuple(names) if names else None,
            ProductBand.from_dict(product) if product else None,
            tuple((float(r[0]), float(r[1]), r[2]) if r else None for r in radiometry) if radiometry else None,
            None if data.get("nodata") is None else float(data["nodata"]),
        )


@dataclass(frozen=True)
class SourceBand(CubeBand):
    """One band of a scene: what a cube records about a band, plus where the band is in its file.

    :attr:`name` is the scene's band text (see :mod:`pipelines.planning.bands`);
    the cube may record another, unique one.
    """

    index: int = field(kw_only=True)
    """1-based band index in the file."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``index`` first, then the :class:`~pipelines.planning.plan.CubeBand` fields."""
        return {"index": self.index, **super().to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SourceBand:
        """Inverse of :meth:`to_dict`."""
        return cls(
            data["name"],
            data.get("description"),
            data.get("scale", 1.0),
            data.get("offset", 0.0),
            data.get("unit"),
            data.get("categorical", False),
            index=data["index"],
        )


@dataclass(frozen=True)
class Scene(OnGrid):
    """The metadata of one readable, georeferenced, dated input raster."""

    href: str
    """Path or URL, as discovered."""
    grid: Grid
    """CRS, transform of the first pixel's corner, shape, and ``AREA_OR_POINT=Point``."""
    dtype: str
    """NumPy dtype name shared by every band."""
    nodata: float | None
    """Nodata value, or None."""
    bands: tuple[SourceBand, ...]
    """Bands, in file order."""
    time: int
    """Acquisition time, POSIX seconds."""
    stack: str
    """Acquisition id: single-band files of one acquisition share it (:func:`pipelines.planning.bands.stack_id`)."""
    size: int | None = None
    """File size in bytes, when known."""
    version: str | None = None
    """What names this version of the file's bytes, when known (:func:`pipelines.rasters.file_stat`)."""
    family: str | None = None
    """Cube family from a product-aware discovery (:attr:`ProductBand.family`), or None."""
    tags: tuple[tuple[str, str], ...] = ()
    """Facts about the acquisition from a product-aware discovery (:attr:`ProductBand.tags`)."""
    replaces: tuple[str, ...] = ()
    """Files of older processings this one replaces (:attr:`ProductBand.replaces`)."""

    @property
    def nodata_key(self) -> str:
        """:func:`nodata_key` of :attr:`nodata`."""
        return nodata_key(self.nodata)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "href": self.href,
            "epsg": self.epsg,
            "transform": list(self.transform),
            "height": self.height,
            "width": self.width,
            "dtype": self.dtype,
            "nodata": stac_nodata(self.nodata),
            "bands": [b.to_dict() for b in self.bands],
            "time": self.time,
            "stack": self.stack,
            "pixel_is_point": self.pixel_is_point,
            "size": self.size,
            "version": self.version,
            "family": self.family,
            "tags": [list(t) for t in self.tags],
            "replaces": list(self.replaces),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scene:
        """Inverse of :meth:`to_dict`."""
        nodata = data.get("nodata")
        return cls(
            href=data["href"],
            grid=Grid(
                f"EPSG:{int(data['epsg'])}",
                tuple(float(v) for v in data["transform"]),  # type: ignore[arg-type]
                int(data["height"]),
                int(data["width"]),
                bool(data.get("pixel_is_point", False)),
            ),
            dtype=data["dtype"],
            nodata=None if nodata is None else float(nodata),
            bands=tuple(SourceBand.from_dict(b) for b in data["bands"]),
            time=int(data["time"]),
            stack=data["stack"],
            size=data.get("size"),
            version=data.get("version"),
            family=data.get("family"),
            tags=tuple((k, v) for k, v in data.get("tags", ())),
            replaces=tuple(data.get("replaces", ())),
        )
