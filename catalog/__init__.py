"""catalog: STAC catalogues of rumi files, search, and stateless reads from anywhere.

* :func:`create_item` turns a finished ``.rumi`` file and its ``.rumih`` blob
  into a STAC 1.1 item; :func:`build_catalog` writes a self-contained
  catalogue (root, one collection per dataset and grid, items) with a
  stac-geoparquet index.
* :func:`search` finds cubes in a catalogue, its index or a STAC API.
* :func:`load` mosaics and stacks many items into one lazy, dask-backed
  xarray dataset (:mod:`catalog.load`); :mod:`catalog.torch` streams
  training chips to PyTorch.
* :class:`Cube` opens a cube from its item or its URL (local, ``http(s)://``,
  ``gs://``) and reads bands, times and windows with one request per frame
  run and none for metadata when the item carries the blob.
* :class:`HTTPRangeSource` and :class:`GCSSource` plug remote storage into
  rumi_core's byte-source protocol; :class:`Storage` bundles them.
* ``xarray.open_dataset(path_or_item, engine="rumi")`` opens a cube lazily
  (:mod:`catalog.xarray_backend`).

Imports flow one way: this package uses rumi_core, never the reverse.
"""

from __future__ import annotations

import logging

from catalog.bands import Band as Band
from catalog.bands import band_from_text as band_from_text
from catalog.collections import build_catalog as build_catalog
from catalog.cube import Cube as Cube
from catalog.cube import CubeRead as CubeRead
from catalog.errors import CatalogError as CatalogError
from catalog.errors import ChecksumError as ChecksumError
from catalog.errors import ItemError as ItemError
from catalog.errors import LoadError as LoadError
from catalog.errors import SearchError as SearchError
from catalog.errors import SelectorError as SelectorError
from catalog.errors import StorageError as StorageError
from catalog.extension import SCHEMA_URI as SCHEMA_URI
from catalog.extension import RumiFields as RumiFields
from catalog.extra_metadata import ExtraMetadata as ExtraMetadata
from catalog.gcs import GCSSource as GCSSource
from catalog.geotiff import export_geotiffs as export_geotiffs
from catalog.geotiff import write_geotiff as write_geotiff
from catalog.grid import Grid as Grid
from catalog.http import HTTPRangeSource as HTTPRangeSource
from catalog.index import query_index as query_index
from catalog.index import write_index as write_index
from catalog.items import create_item as create_item
from catalog.load import load as load
from catalog.search import SearchHit as SearchHit
from catalog.search import search as search
from catalog.selectors import TimeRange as TimeRange
from catalog.storage import Storage as Storage
from catalog.validation import STACValidationError as STACValidationError
from catalog.validation import ValidationReport as ValidationReport
from catalog.validation import validate_stac as validate_stac

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "SCHEMA_URI",
    "Band",
    "CatalogError",
    "Cube",
    "CubeRead",
    "ExtraMetadata",
    "GCSSource",
    "Grid",
    "HTTPRangeSource",
    "ChecksumError",
    "ItemError",
    "LoadError",
    "RumiFields",
    "STACValidationError",
    "SearchError",
    "SearchHit",
    "SelectorError",
    "Storage",
    "StorageError",
    "TimeRange",
    "ValidationReport",
    "band_from_text",
    "build_catalog",
    "create_item",
    "export_geotiffs",
    "load",
    "query_index",
    "search",
    "validate_stac",
    "write_geotiff",
]
