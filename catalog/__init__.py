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

import lazy_loader

# Every public name is listed once, in ``__init__.pyi``: type checkers read the
# stub, and lazy_loader parses it to load each name on first use (PEP 562), so
# importing one submodule (``catalog.http`` for a range server, say) does not
# import xarray, dask and pystac. lazy_loader also keeps ``catalog.load`` and
# ``catalog.search`` the functions after their submodules of the same name are
# imported.
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

logging.getLogger(__name__).addHandler(logging.NullHandler())
