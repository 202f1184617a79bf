"""Discovering scenes: paths, globs, directories, URLs and STAC ItemCollections.

Issue 4, transform 1. Each input text becomes zero or more
:class:`~pipelines.scene.SceneRef` objects:

* a local path, or a glob (``scenes/*/*_B0[2348].tif``, ``**`` recursing);
* a directory: every ``.tif``/``.tiff`` file below it;
* an ``http(s)://`` or ``gs://`` URL of a raster, read later through GDAL's
  virtual file systems (:mod:`pipelines.sources`);
* a STAC ItemCollection (or single Item) JSON file, local or ``http(s)://``,
  whose GeoTIFF assets become scenes dated by their item and stacked by item
  id, with band names from ``eo:bands`` or the asset key.

An input that finds nothing, or a STAC file that cannot be read, becomes a
:class:`~pipelines.deadletter.DeadLetter`.
"""

from __future__ import annotations

import glob
import json
import os
import posixpath
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import apache_beam as beam
from apache_beam.pvalue import PCollection

from pipelines.counters import inc
from pipelines.deadletter import DeadLetter
from pipelines.scene import SceneRef
from pipelines.sources import is_url

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["RASTER_SUFFIXES", "DiscoverScenes", "discover", "stac_scene_refs"]

RASTER_SUFFIXES: Final = (".tif", ".tiff")
"""File suffixes a directory input is searched for (case-insensitive)."""

_STAC_SUFFIXES: Final = (".json", ".geojson")
_SKIPPED_ROLES: Final = frozenset({"thumbnail", "overview", "metadata"})
_GLOB_CHARS: Final = frozenset("*?[")
STAGE = "DiscoverScenes"


def _resolve(href: str, base: str) -> str:
    if is_url(href) or os.path.isabs(href):
        return href
    if is_url(base):
        return posixpath.join(posixpath.dirname(base), href)
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(base)), href))


def _is_geotiff(asset: Mapping[str, Any]) -> bool:
    media = str(asset.get("type", "")).lower()
    href = str(asset.get("href", "")).lower().split("?", 1)[0]
    return "tiff" in media or href.endswith(RASTER_SUFFIXES)


def stac_scene_refs(document: Mapping[str, Any], base: str) -> list[SceneRef]:
    """The GeoTIFF assets of a STAC ItemCollection or Item as scene references.

    Relative asset hrefs are resolved against ``base``, the document's own
    location. Thumbnails, overviews and metadata assets are skipped.

    Raises:
        ValueError: the document is neither a FeatureCollection nor a Feature.
    """
    kind = document.get("type")
    if kind == "FeatureCollection":
        items = list(document.get("features", []))
    elif kind == "Feature":
        items = [document]
    else:
        raise ValueError(f"expected a STAC ItemCollection (type FeatureCollection) or Item (type Feature), got type {kind!r}")
    refs: list[SceneRef] = []
    for item in items:
        props = item.get("properties") or {}
        time = props.get("datetime") or props.get("start_datetime")
        assets = item.get("assets") or {}
        for key in sorted(assets):
            asset = assets[key]
            if _SKIPPED_ROLES & set(asset.get("roles") or ()) or not _is_geotiff(asset):
                continue
            bands = asset.get("eo:bands") or asset.get("bands") or []
            names = tuple(str(b.get("name") or "") for b in bands) if bands else (str(key),)
            refs.append(SceneRef(_resolve(str(asset["href"]), base), time, str(item.get("id") or base), names))
    return refs


def _read_json(href: str) -> Any:
    if is_url(href):
        if not href.startswith(("http://", "https://")):
            raise ValueError("STAC files are read from local paths or http(s):// URLs")
        with urllib.request.urlopen(href, timeout=60) as response:
            return json.load(response)
    with open(href, encoding="utf-8") as f:
        return json.load(f)


def discover(text: str) -> list[SceneRef | DeadLetter]:
    """Expand one input into scene references, or one dead letter when it finds nothing.

    >>> discover("/nonexistent/*.tif")[0].reason
    'no-match'
    """
    if text.lower().split("?", 1)[0].endswith(_STAC_SUFFIXES):
        try:
            refs = stac_scene_refs(_read_json(text), text)
        except (OSError, ValueError, KeyError, TypeError) as err:
            return [DeadLetter(text, "bad-stac", f"cannot read the STAC ItemCollection: {err}", STAGE)]
        if not refs:
            return [DeadLetter(text, "no-match", "the STAC document has no GeoTIFF asset", STAGE)]
        return list(refs)
    if text.startswith("gs://") and _GLOB_CHARS & set(text):
        from pipelines.bucket import output_store

        matched = output_store().glob(text)
        if not matched:
            return [DeadLetter(text, "no-match", "no object matches this pattern", STAGE)]
        return [SceneRef(url) for url in matched]
    if is_url(text):
        return [SceneRef(text)]
    if _GLOB_CHARS & set(text):
        found = sorted(os.path.abspath(p) for p in glob.glob(text, recursive=True) if os.path.isfile(p))
    elif os.path.isdir(text):
        found = sorted(
            os.path.abspath(os.path.join(root, name))
            for root, _, names in os.walk(text)
            for name in names
            if name.lower().endswith(RASTER_SUFFIXES)
        )
    elif os.path.isfile(text):
        found = [os.path.abspath(text)]
    else:
        found = []
    if not found:
        return [DeadLetter(text, "no-match", "no file matches this path or pattern", STAGE)]
    return [SceneRef(p) for p in found]


@dataclass
class DiscoverScenes(beam.PTransform[PCollection[str], PCollection[SceneRef | DeadLetter]]):
    """Expand input texts into scene references and dead letters (issue 4, transform 1).

    Input: ``PCollection[str]``. Output: ``PCollection[SceneRef | DeadLetter]``,
    reshuffled so that reading their metadata spreads over the workers.
    """

    def __post_init__(self) -> None:
        super().__init__()

    def expand(self, inputs: PCollection[str]) -> PCollection[SceneRef | DeadLetter]:
        """Discover, count, reshuffle."""
        found: PCollection[SceneRef | DeadLetter] = inputs | "Discover" >> beam.FlatMap(_discover_counted) | "Spread" >> beam.Reshuffle()
        return found


def _discover_counted(text: str) -> list[SceneRef | DeadLetter]:
    found = discover(text)
    for item in found:
        inc(DiscoverScenes, "dead_letter.no-match" if isinstance(item, DeadLetter) else "scenes")
    return found
