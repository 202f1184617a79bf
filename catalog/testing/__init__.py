"""Test helpers shipped with catalog, for its tests, the pipeline's and the benchmarks.

* :class:`RangeRequestServer` serves a directory over HTTP on 127.0.0.1 with
  ``Range`` support and counts every request and byte it sends.
* :class:`GCSEmulator` runs gcp-storage-emulator in-process on 127.0.0.1.
* :class:`StaticStacApi` serves a list of STAC items as a STAC API (``/search``
  with bbox, datetime, query, CQL2 filter and paging) on 127.0.0.1.
* :func:`write_scene` writes a multi-tile, multi-period catalogue (two UTM
  zones, an overlap, gaps, NaN nodata) with the GeoTIFFs it was made from.
"""

from __future__ import annotations

from catalog.testing._gcs_emulator import GCSEmulator as GCSEmulator
from catalog.testing._http_server import Fault as Fault
from catalog.testing._http_server import RangeRequestServer as RangeRequestServer
from catalog.testing._http_server import ServedRequest as ServedRequest
from catalog.testing._scenes import Scene as Scene
from catalog.testing._scenes import SceneItem as SceneItem
from catalog.testing._scenes import write_scene as write_scene
from catalog.testing._stac_api import StaticStacApi as StaticStacApi

__all__ = ["Fault", "GCSEmulator", "RangeRequestServer", "Scene", "SceneItem", "ServedRequest", "StaticStacApi", "write_scene"]
