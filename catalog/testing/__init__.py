"""Test helpers shipped with catalog, for its tests, the pipeline's and the benchmarks.

* :class:`RangeRequestServer` serves a directory over HTTP on 127.0.0.1 with
  ``Range`` support and counts every request and byte it sends.
* :class:`GCSEmulator` runs gcp-storage-emulator in-process on 127.0.0.1.
* :class:`StaticStacApi` serves a list of STAC items as a STAC API (``/search``
  with bbox, datetime, query, CQL2 filter and paging) on 127.0.0.1.
"""

from __future__ import annotations

from catalog.testing._gcs_emulator import GCSEmulator as GCSEmulator
from catalog.testing._http_server import RangeRequestServer as RangeRequestServer
from catalog.testing._http_server import ServedRequest as ServedRequest
from catalog.testing._stac_api import StaticStacApi as StaticStacApi

__all__ = ["GCSEmulator", "RangeRequestServer", "ServedRequest", "StaticStacApi"]
