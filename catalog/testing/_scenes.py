"""A generated multi-tile, multi-period catalogue: GeoTIFF sources, rumi cubes and their STAC items.

:func:`write_scene` writes, under one root, a small world that exercises
mosaicking: float32 scenes with NaN nodata (and scattered NaN samples) on
four tiles,

* ``A-2021-01`` and ``A-2021-02``: one tile of EPSG:32632 in two periods;
* ``B-2021``: a tile of the same lattice overlapping A's lower right
  quarter, with time steps shared with both of A's periods;
* ``C-2021``: a tile of EPSG:32633, the neighbouring UTM zone, overlapping
  B's east edge;

leaving gaps at the corners of their union. Each tile and date is first a
two-band GeoTIFF (``sources/<item>_<date>.tif``), the ground truth; each item
is then a cube of its GeoTIFFs (``cubes/<item>.rumi``) and a STAC item in a
catalogue (``stac/catalog.json``) with an index.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import os


BANDS = ("B4, Red, 665nm", "B8, NIR, 842nm")
TILE = 32
PIXEL = 60.0


@dataclass(frozen=True)
class SceneItem:
    """One generated item."""

    id: str
    crs: str
    transform: tuple[float, float, float, float, float, float]
    height: int
    width: int
    dates: tuple[str, ...]
    sources: tuple[Path, ...]
    """One GeoTIFF per date, bands in cube order."""
    cube: Path


@dataclass(frozen=True)
class Scene:
    """What :func:`write_scene` wrote."""

    root: Path
    items: tuple[SceneItem, ...]
    catalog: Path
    """``stac/catalog.json``."""
    item_paths: tuple[str, ...]
    """Each item's JSON, relative to :attr:`root` (with ``/``), in :attr:`items` order."""

    def item(self, item_id: str) -> SceneItem:
        """The item called ``item_id``."""
        return next(it for it in self.items if it.id == item_id)


def _samples(seed: int, height: int, width: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    rng = np.random.default_rng(seed)
    data = rng.normal(1000.0, 300.0, size=(len(BANDS), height, width)).astype(np.float32)
    data[rng.random(data.shape) < 0.1] = np.nan
    return data


def write_scene(root: str | os.PathLike[str]) -> Scene:
    """Write the sources, cubes and catalogue under ``root`` (see the module documentation)."""
    import rasterio
    from pyproj import Transformer

    import rumi_core
    from catalog.collections import build_catalog
    from catalog.extra_metadata import ExtraMetadata
    from catalog.items import create_item

    base = Path(root)
    (base / "sources").mkdir(parents=True, exist_ok=True)
    (base / "cubes").mkdir(parents=True, exist_ok=True)
    a = (PIXEL, 0.0, 735000.0, 0.0, -PIXEL, 5000040.0)
    b = (PIXEL, 0.0, a[2] + 48 * PIXEL, 0.0, -PIXEL, a[5] - 40 * PIXEL)
    # C starts 12 pixels west of B's east edge, in the next zone, snapped to its own 60 m lattice.
    east, north = b[2] + 96 * PIXEL - 12 * PIXEL, b[5] + 10 * PIXEL
    x33, y33 = Transformer.from_crs("EPSG:32632", "EPSG:32633", always_xy=True).transform(east, north)
    c = (PIXEL, 0.0, float(np.floor(x33 / PIXEL) * PIXEL), 0.0, -PIXEL, float(np.floor(y33 / PIXEL) * PIXEL))
    plan = [
        ("A-2021-01", "EPSG:32632", a, 80, 96, ("2021-01-05", "2021-01-15")),
        ("A-2021-02", "EPSG:32632", a, 80, 96, ("2021-02-05", "2021-02-15")),
        ("B-2021", "EPSG:32632", b, 72, 96, ("2021-01-15", "2021-02-05")),
        ("C-2021", "EPSG:32633", c, 64, 70, ("2021-01-05", "2021-02-15")),
    ]
    items: list[SceneItem] = []
    stac_items = []
    for k, (item_id, crs, transform, height, width, dates) in enumerate(plan):
        sources = []
        stack = []
        for j, date in enumerate(dates):
            data = _samples(100 * k + j, height, width)
            path = base / "sources" / f"{item_id}_{date}.tif"
            with rasterio.open(
                path, "w", driver="GTiff", height=height, width=width, count=len(BANDS), dtype="float32",
                crs=crs, transform=rasterio.Affine(*transform), nodata=float("nan"),
            ) as dst:  # fmt: skip
                dst.write(data)
            sources.append(path)
            stack.append(data)
        cube_path = base / "cubes" / f"{item_id}.rumi"
        blob = rumi_core.write(
            cube_path, np.stack(stack), bands=list(BANDS), times=list(dates), crs=crs, transform=transform,
            tile_size=TILE, nodata=float("nan"),
        )  # fmt: skip
        cube_path.with_suffix(".rumih").write_bytes(blob)
        stac_items.append(create_item(cube_path, extra=ExtraMetadata(id=item_id, dataset="scene", nodata="nan"), thumbnail=False))
        items.append(SceneItem(item_id, crs, transform, height, width, dates, tuple(sources), cube_path))
    catalog = build_catalog(stac_items, base / "stac", catalog_id="scene")
    top = base.resolve()
    paths = {it.id: Path(it.get_self_href() or "").resolve().relative_to(top).as_posix() for it in catalog.get_items(recursive=True)}
    return Scene(base, tuple(items), base / "stac" / "catalog.json", tuple(paths[it.id] for it in items))
