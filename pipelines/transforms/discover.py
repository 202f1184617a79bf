"""Discovering scenes: paths, globs, directories, URLs and STAC ItemCollections.

Each input text becomes zero or more
:class:`~pipelines.planning.scene.SceneRef` objects:

* a local path, or a glob (``scenes/*/*_B0[2348].tif``, ``**`` recursing);
* a directory: every ``.tif``/``.tiff`` file below it;
* an ``http(s)://`` or ``gs://`` URL of a raster, read later through GDAL's
  virtual file systems (:mod:`pipelines.rasters`);
* a STAC ItemCollection (or single Item) JSON file, or a static STAC catalogue
  or collection (its ``catalog.json``/``collection.json``; every item below it), local or ``http(s)://``,
  whose GeoTIFF assets become scenes dated by their item and stacked by item
  id, with band names from ``eo:bands`` or the asset key. Items that are
  Sentinel-2 L2A by their properties go through :mod:`pipelines.sentinel2`
  instead (band table, radiometry, resolution groups, newest processing).

An input that finds nothing, or a STAC file that cannot be read, becomes a
:class:`~pipelines.transforms.dead_letters.DeadLetter`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import apache_beam as beam
from apache_beam.pvalue import PCollection

from catalog.bands import common_nodata, nodata_mismatch
from catalog.json_shape import json_kind, json_value
from catalog.storage import Storage, join_href
from pipelines.archives import ArchiveError, is_archive, raster_members
from pipelines.folders import folder_files, not_a_file, pattern_files
from pipelines.planning.hrefs import one_href_per_file
from pipelines.planning.scene import Radiometry, SceneRef
from pipelines.rasters import GDAL_SIDECAR_SUFFIXES, GEOTIFF_SUFFIXES, RASTER_SUFFIXES, SIDECARS_ONLY, is_url, sidecar_of, suffix_list
from pipelines.sentinel2.bands import select_bands
from pipelines.sentinel2.items import not_s2_l2a, scene_refs
from pipelines.sentinel2.search import S2Request, select_items
from pipelines.stac_shape import is_stac_document, malformed
from pipelines.transforms.base import DataclassPTransform
from pipelines.transforms.collect import inc
from pipelines.transforms.dead_letters import DeadLetter

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["RASTER_SUFFIXES", "DiscoverScenes", "asset_nodata", "asset_radiometry", "discover", "stac_scene_refs"]


_SKIPPED_ROLES: Final = frozenset({"thumbnail", "overview", "metadata"})
_GLOB_CHARS: Final = frozenset("*?[")
STAGE = "DiscoverScenes"
_NOT_UTF8: Final = "the name is not UTF-8 text (GDAL opens paths and STAC names files as UTF-8); rename it"


def _is_geotiff(asset: Mapping[str, Any]) -> bool:
    # GeoTIFF only, not every suffix a directory is searched for: an item may list its
    # bands twice, as COGs and as the JPEG 2000 they came from (Earth Search's "*-jp2").
    media = str(asset.get("type", "")).lower()
    href = str(asset.get("href", "")).lower().split("?", 1)[0]
    return "tiff" in media or href.endswith(GEOTIFF_SUFFIXES)


def stac_scene_refs(document: Any, base: str, s2: S2Request | None = None) -> list[SceneRef | DeadLetter]:
    """The GeoTIFF assets of a STAC ItemCollection or Item as scene references.

    Relative asset hrefs are resolved against ``base``, the document's own
    location. Thumbnails, overviews and metadata assets are skipped.
    Sentinel-2 L2A items become the scenes :func:`pipelines.sentinel2.items.scene_refs`
    makes of them, as ``s2`` asks. An item whose shape is not a STAC item's
    where discovery reads it (:func:`~pipelines.stac_shape.malformed`), or whose asset states an
    unreadable scale, offset or nodata, is a ``bad-stac`` dead letter naming
    the item and the field; one with no GeoTIFF asset is a ``no-match`` dead
    letter naming it and the assets it has; the other items are found.

    Raises:
        ValueError: the document is neither a FeatureCollection nor a Feature,
            or its ``features`` are not a list.
    """
    kind = document.get("type") if isinstance(document, dict) else None
    if kind == "FeatureCollection":
        features = document.get("features", [])
        if not isinstance(features, list):
            raise ValueError(f"features is {json_kind(features)}, not a list")
    elif kind == "Feature":
        features = [document]
    else:
        got = f"type {kind!r}" if isinstance(document, dict) else json_kind(document)
        raise ValueError(f"expected a STAC ItemCollection (type FeatureCollection) or Item (type Feature), got {got}")
    found: list[SceneRef | DeadLetter] = []
    items: list[tuple[str, dict[str, Any]]] = []
    for i, item in enumerate(features):
        name = f"feature {i}" + (f" (id {item['id']!r})" if isinstance(item, dict) and "id" in item else "")
        problem = malformed(item)
        if problem is None:
            items.append((name, item))
        else:
            found.append(DeadLetter(base, "bad-stac", f"{name}: {problem}", STAGE))
    s2 = s2 or S2Request()
    why_not = [not_s2_l2a(item) for _, item in items]
    sentinel2 = [item for (_, item), why in zip(items, why_not, strict=True) if why is None]
    selection = select_items(((item, base) for item in sentinel2), tiles=s2.tiles, max_cloud=s2.max_cloud)
    found += [DeadLetter(base, "bad-stac", problem, STAGE) for problem in selection.unreadable]
    found += scene_refs(selection.items, select_bands(s2.bands), resolution=s2.resolution, dropped=selection.reprocessed)
    for (name, item), why in zip(items, why_not, strict=True):
        if why is None:
            continue
        if s2.given:
            # Those options select among Sentinel-2 L2A items; converted as a GeoTIFF item, this one would give every
            # band of its assets under no radiometry of a Sentinel-2 baseline, more and other than asked.
            options = ", ".join(s2.given)
            found.append(
                DeadLetter(
                    base,
                    "not-sentinel2",
                    f"{name} is not read as a Sentinel-2 L2A item: {why}; {options} select{'s' if len(s2.given) == 1 else ''} among "
                    f"those, so it is left out (convert it without {options} to take its GeoTIFF assets as they are)",
                    STAGE,
                )
            )
            continue
        try:
            refs = _asset_refs(item, base)
        except ValueError as err:
            found.append(DeadLetter(base, "bad-stac", f"{name}: {err}", STAGE))
            continue
        found += refs or [DeadLetter(base, "no-match", f"{name} has no GeoTIFF asset{_what_it_has(item)}", STAGE)]
    return found


_LEVEL_1C_TYPES: Final = ("S2MSI1C",)
"""The product types of Sentinel-2 Level-1C items (``s2:product_type``, CDSE's ``product:type``)."""


def _what_it_has(item: Mapping[str, Any]) -> str:
    """What a message says of an item with no GeoTIFF asset: its assets' keys and types, and what a Level-1C item is."""
    assets = item.get("assets") or {}
    listed = ", ".join(f"{key} ({assets[key].get('type') or 'no type'})" for key in sorted(assets)[:8])
    more = f" and {len(assets) - 8} more" if len(assets) > 8 else ""
    text = f" (its assets: {listed}{more})" if assets else " (it has no assets)"
    props = item.get("properties") or {}
    if any(props.get(key) in _LEVEL_1C_TYPES for key in ("s2:product_type", "product:type")):
        text += "; it is a Sentinel-2 Level-1C item, and STAC items are read as Sentinel-2 from Level-2A only: convert its SAFE product"
    return text


def _asset_refs(item: dict[str, Any], base: str) -> list[SceneRef]:
    """The scene references of the GeoTIFF assets of one well-formed item (:func:`stac_scene_refs`).

    Raises:
        ValueError: an asset states an unreadable scale, offset or nodata.
    """
    props = item.get("properties") or {}
    time = props.get("datetime") or props.get("start_datetime")
    assets = item.get("assets") or {}
    refs = []
    for key in sorted(assets):
        asset = assets[key]
        if _SKIPPED_ROLES & set(asset.get("roles") or ()) or not _is_geotiff(asset):
            continue
        bands = asset.get("eo:bands") or asset.get("bands") or []
        names = tuple(str(b.get("name") or "") for b in bands) if bands else (str(key),)
        href = join_href(base, asset["href"])
        radiometry, nodata = asset_radiometry(asset, href), asset_nodata(asset, href)
        refs.append(SceneRef(href, time, str(item.get("id") or base), names, band_radiometry=radiometry, nodata=nodata))
    return refs


_RASTER_V1: Final = ("scale", "offset")
"""The keys of a ``raster:bands`` entry (raster extension 1.x)."""
_RASTER_V2: Final = ("raster:scale", "raster:offset")
"""The keys of a STAC 1.1 band object, or of a one-band asset (raster extension 2.x)."""


def asset_radiometry(asset: Mapping[str, Any], href: str) -> tuple[Radiometry | None, ...] | None:
    """Per band, the ``(scale, offset, unit)`` a STAC asset states; None for a band that states neither, or an asset of none.

    Raster extension 1.x lists them in ``raster:bands``; 2.x (STAC 1.1) puts
    ``raster:scale``, ``raster:offset`` and ``unit`` in each band object of
    ``bands``, or on the asset itself when it has one band. A stated scale
    without an offset has offset 0, and the other way round scale 1, as the
    extension defines them.

    Raises:
        ValueError: a scale or offset is not a finite number, or a scale is 0.
    """
    listed = asset.get("raster:bands")
    keys = _RASTER_V1
    if not isinstance(listed, list):
        listed, keys = asset.get("bands"), _RASTER_V2
        if not isinstance(listed, list) or (len(listed) <= 1 and not _states(listed[0] if listed else None, keys)):
            listed = [asset]
    stated: list[Radiometry | None] = []
    for band in listed:
        if not _states(band, keys):
            stated.append(None)
            continue
        scale, offset = (band.get(keys[0], 1.0), band.get(keys[1], 0.0))
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (scale, offset)) or scale == 0:
            raise ValueError(f"the asset {href} states scale {scale!r} and offset {offset!r}; a scale is a finite non-zero number")
        unit = band.get("unit")
        stated.append((float(scale), float(offset), str(unit) if unit else None))
    return tuple(stated) if any(stated) else None


def asset_nodata(asset: Mapping[str, Any], href: str) -> float | None:
    """The no-data value a STAC asset states for every one of its bands; None where it states none, or not one for all.

    Raster extension 1.x states it per band in ``raster:bands``; STAC 1.1 as
    ``nodata`` in each band object of ``bands``, or on the asset for every
    band that does not state its own. A GeoTIFF holds one value for all its
    bands, so bands that state different values, or some none, state none
    (:func:`catalog.bands.common_nodata`).

    Raises:
        ValueError: a value is neither a number nor ``"nan"``, ``"inf"`` or ``"-inf"``.
    """
    listed = asset.get("raster:bands")
    if isinstance(listed, list):
        values = [band.get("nodata") if isinstance(band, dict) else None for band in listed]
    else:
        bands, default = asset.get("bands"), asset.get("nodata")
        listed = bands if isinstance(bands, list) and bands else [{}]
        values = [band.get("nodata", default) if isinstance(band, dict) else default for band in listed]
    problem = next((p for value in values if (p := nodata_mismatch(value, "its nodata"))), None)
    if problem is not None:
        raise ValueError(f"the asset {href}: {problem}")
    return common_nodata(values)


def _states(band: Any, keys: tuple[str, str]) -> bool:
    """Whether ``band`` (a band object, or a one-band asset) states a scale or an offset under ``keys``."""
    return isinstance(band, dict) and any(k in band for k in keys)


def _catalog_items(href: str, root: bytes) -> dict[str, Any]:
    """Every item below a static STAC catalogue or collection, as one ItemCollection with absolute asset hrefs, sorted by id.

    ``root`` is the document at ``href``, read already: only the documents below it are read.

    Raises:
        ValueError: a document of the catalogue cannot be read or is malformed (:func:`catalog.walk.walk_items`).
    """
    from catalog.walk import walk_items

    storage = Storage()
    features = []
    for where, item in walk_items(href, lambda url: root if url == href else storage.read(url)):
        for asset in (item.get("assets") or {}).values():
            asset["href"] = join_href(where, asset["href"])
        features.append({**item, "links": []})
    return {"type": "FeatureCollection", "features": sorted(features, key=lambda f: str(f.get("id")))}


def discover(text: str, s2: S2Request | None = None) -> list[SceneRef | DeadLetter]:
    """Expand one input into scene references, or one dead letter when it finds nothing.

    A file GDAL keeps beside a raster that exists (:data:`~pipelines.rasters.GDAL_SIDECAR_SUFFIXES`)
    expands to nothing: a shell expands ``scenes/*`` into them too.

    >>> discover("/nonexistent/*.tif")[0].reason
    'no-match'
    """
    if is_stac_document(text):
        try:
            raw = Storage().read(text)
            try:
                document = json_value(raw)
            except ValueError as err:
                return [DeadLetter(text, "bad-stac", f"the STAC ItemCollection {err}", STAGE)]
            if isinstance(document, dict) and document.get("type") in ("Catalog", "Collection"):
                document = _catalog_items(text, raw)
            listed = stac_scene_refs(document, text, s2)
        except (OSError, ValueError, KeyError, TypeError) as err:
            return [DeadLetter(text, "bad-stac", f"cannot read the STAC ItemCollection: {err}", STAGE)]
        if not listed:
            return [DeadLetter(text, "no-match", "the STAC document has no GeoTIFF asset", STAGE)]
        return listed
    if text.startswith("gs://") and (_GLOB_CHARS & set(text) or _is_prefix(text)):
        return _bucket_scenes(text)
    if is_url(text):
        return _scenes([text])
    # A file or folder of that very name is named, not a pattern: "scene[1]_B04.tif" exists, or a shell
    # expanded *.tif into it (as a pattern, it matched "scene1_B04.tif", or nothing).
    if _GLOB_CHARS & set(text) and not os.path.lexists(text):
        found = sorted(os.path.abspath(p) for p in pattern_files(text))
        if found:
            return _glob_scenes(text, _one_path_per_file(found))
    elif os.path.isdir(text):
        return _folder_scenes(text)
    elif os.path.isfile(text):
        if sidecar_of(text) is not None:
            return []  # a shell's scenes/* names x.tif.msk beside x.tif: GDAL reads it through x.tif
        found = [os.path.abspath(text)]
    else:
        found = []
    if not found:
        return [DeadLetter(text, "no-match", "no file matches this path or pattern", STAGE)]
    return _scenes(_one_path_per_file(found))


def _folder_scenes(folder: str) -> list[SceneRef | DeadLetter]:
    """The scenes of the rasters and archives below a local folder, and a dead letter for each folder below it that cannot be listed.

    A folder that cannot be listed (no permission) loses its scenes: it is
    named, as an unreadable file is, where ``os.walk`` passed over it.
    """
    unlisted: list[OSError] = []
    found = sorted(os.path.abspath(p) for p in folder_files(folder, onerror=unlisted.append) if _is_scene_name(os.path.basename(p)))
    lost: list[SceneRef | DeadLetter] = [
        DeadLetter(str(err.filename), "unreadable", f"the folder cannot be listed: {err.strerror}", STAGE) for err in unlisted
    ]
    if found:
        return lost + _scenes(_one_path_per_file(found))
    return lost or [DeadLetter(folder, "no-match", "no file matches this path or pattern", STAGE)]


def _is_scene_name(name: str) -> bool:
    """Whether a file or object name is one a folder is searched for: a raster (:data:`RASTER_SUFFIXES`) or an archive."""
    return name.lower().endswith(RASTER_SUFFIXES) or is_archive(name)


def _is_prefix(url: str) -> bool:
    """Whether a ``gs://`` URL names a folder of objects (``gs://b/scenes/``, ``gs://b``), not one raster or archive.

    A bucket has no folders; a prefix is searched as a local directory is.
    """
    last = url.removeprefix("gs://").rstrip("/").rpartition("/")[2] if url.count("/") > 2 else ""
    return url.endswith("/") or not last or not _is_scene_name(last)


def _bucket_scenes(text: str) -> list[SceneRef | DeadLetter]:
    """The scenes a ``gs://`` glob matches, or the rasters and archives below a ``gs://`` prefix."""
    from google.api_core.exceptions import NotFound

    from pipelines.bucket import output_store

    glob_chars = bool(_GLOB_CHARS & set(text))
    if glob_chars and not text.endswith("/") and output_store().stat(text) is not None:
        return _scenes([text])  # an object of that very name, "[" and all, not a pattern
    try:
        below = sorted(output_store().listing(text)) if glob_chars and text.endswith("/") else []
        if below:
            glob_chars = False  # a folder of that very name, "[" and all: what is below it
        matched = below or output_store().glob(text if glob_chars else text.rstrip("/") + "/**")
    except NotFound:
        bucket = text.removeprefix("gs://").partition("/")[0]
        return [DeadLetter(text, "no-match", f"the bucket {bucket!r} does not exist", STAGE)]
    if glob_chars:
        if not matched:
            return [DeadLetter(text, "no-match", "no object matches this pattern", STAGE)]
        return _glob_scenes(text, matched)
    found = [url for url in matched if _is_scene_name(url)]
    if found:
        return _scenes(found)
    if not text.endswith("/") and not matched:
        return _scenes([text])  # no folder of that name: an object named without a suffix, for GDAL to read
    return [DeadLetter(text, "no-match", f"no {suffix_list(RASTER_SUFFIXES)} object or archive below this prefix", STAGE)]


def _scenes(paths: list[str]) -> list[SceneRef | DeadLetter]:
    """A scene per path, and per raster member of a local archive (:mod:`pipelines.archives`)."""
    scenes: list[SceneRef | DeadLetter] = []
    for path in paths:
        if (shown := _undecodable(path)) is not None:
            scenes.append(DeadLetter(shown, "bad-name", _NOT_UTF8, STAGE))
        elif not is_url(path) and (kind := not_a_file(path)) is not None:
            scenes.append(DeadLetter(path, "unreadable", f"it is {kind}, not a file: GDAL would wait on it or read it without end", STAGE))
        elif not is_archive(path):
            scenes.append(SceneRef(path))
        elif is_url(path):
            scenes.append(DeadLetter(path, "unreadable", "archives are read from local paths only; copy it here or extract it", STAGE))
        else:
            try:
                members = raster_members(path, RASTER_SUFFIXES)
            except ArchiveError as err:
                scenes.append(DeadLetter(path, "unreadable", str(err), STAGE))
                continue
            if not members:
                scenes.append(DeadLetter(path, "no-match", f"the archive holds no {suffix_list(RASTER_SUFFIXES)} file", STAGE))
            scenes.extend(SceneRef(member) for member in members)
    return scenes


def _undecodable(path: str) -> str | None:
    """The path with its undecodable bytes shown as ``\\xNN``, or None when it is UTF-8 text.

    Python gives a name of non-UTF-8 bytes (a Latin-1 name from an old archive)
    as lone surrogates (PEP 383), which no UTF-8 encoder, GDAL's included, accepts.
    """
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(path).decode("utf-8", "backslashreplace")
    return None


def _glob_scenes(pattern: str, matched: list[str]) -> list[SceneRef | DeadLetter]:
    """The scenes among a glob's matches: every file but those GDAL keeps beside rasters (:data:`~pipelines.rasters.GDAL_SIDECAR_SUFFIXES`).

    A directory is searched for raster suffixes only; a glob takes any file,
    so ``scenes/*`` would also list ``x.tif.ovr``, ``x.tif.msk`` and
    ``x.tif.aux.xml``, which GDAL reads through ``x.tif`` itself.
    """
    kept = [p for p in matched if not p.lower().endswith(GDAL_SIDECAR_SUFFIXES)]
    if kept:
        return _scenes(kept)
    return [DeadLetter(pattern, "no-match", SIDECARS_ONLY, STAGE)]


def _one_path_per_file(paths: list[str]) -> list[str]:
    """Keep one path of each file (:func:`~pipelines.planning.hrefs.one_href_per_file`), in the order given.

    ``glob``'s ``**`` follows symbolic links to directories, and a directory
    walk lists symbolic links to files: one file can be found at several paths.
    """
    keep = set(one_href_per_file(paths).values())
    return [p for p in paths if p in keep]


@dataclass
class DiscoverScenes(DataclassPTransform[PCollection[str], PCollection[SceneRef | DeadLetter]]):
    """Expand input texts into scene references and dead letters.

    Input: ``PCollection[str]``. Output: ``PCollection[SceneRef | DeadLetter]``,
    reshuffled so that reading their metadata spreads over the workers.
    """

    s2: S2Request | None = None
    """What Sentinel-2 L2A items in STAC inputs are converted to."""

    def expand(self, inputs: PCollection[str]) -> PCollection[SceneRef | DeadLetter]:
        """Discover, count, reshuffle."""
        discovered = inputs | "Discover" >> beam.FlatMap(_discover_counted, s2=self.s2)
        found: PCollection[SceneRef | DeadLetter] = discovered | "Spread" >> beam.Reshuffle()
        return found


def _discover_counted(text: str, s2: S2Request | None = None) -> list[SceneRef | DeadLetter]:
    found = discover(text, s2)
    for item in found:
        inc(DiscoverScenes, "dead_letter.no-match" if isinstance(item, DeadLetter) else "scenes")
    return found
