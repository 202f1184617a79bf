"""Small metadata files beside input rasters: a product's ``MTD_MSIL2A.xml``, ``_MTL.json``.

Product metadata says what an input's values mean where its rasters do not
(:mod:`pipelines.sentinel2.safe`, :mod:`pipelines.landsat`). Every image of a
product asks for the same file, so its bytes are kept per version of the
file (modification time or object generation, and size): a file rewritten
between two runs in one process is read again. Local paths and ``gs://``
objects are read; anything else is no sidecar.
"""

from __future__ import annotations

import functools
import os
from typing import Final

from pipelines.bucket import is_gs, output_store

__all__ = ["MetadataError", "Radiometry", "SidecarError", "read_sidecar"]

MAX_SIDECAR_BYTES: Final = 16 << 20
"""Largest sidecar read; product metadata files are tens of KiB."""


Radiometry = tuple[float, float, str | None]
"""``(scale, offset, unit)`` of a band's stored values, as product metadata declares them."""


class SidecarError(OSError):
    """A sidecar exists but cannot be read."""


class MetadataError(ValueError):
    """Product metadata exists but does not say what its values mean."""


def _version(path: str) -> tuple[int, int] | None:
    """``(modification time or generation, size)`` of a file or ``gs://`` object, or None where there is none."""
    if is_gs(path):
        stat = output_store().stat(path)
        return None if stat is None else (stat.generation or 0, stat.size)
    if "://" in path:
        return None
    try:
        local = os.stat(path)
    except OSError:
        return None
    return local.st_mtime_ns, local.st_size


@functools.lru_cache(maxsize=64)
def _read(path: str, version: tuple[int, int]) -> bytes:
    if is_gs(path):
        data = output_store().read(path)
        if data is None:
            raise SidecarError(f"{path} was removed while it was read")
        return data
    with open(path, "rb") as f:
        return f.read(MAX_SIDECAR_BYTES + 1)


def read_sidecar(path: str) -> bytes | None:
    """The bytes of the file or ``gs://`` object ``path``, or None when there is none.

    Raises:
        SidecarError: it exists but is larger than :data:`MAX_SIDECAR_BYTES`, or reading it failed.
    """
    version = _version(path)
    if version is None:
        return None
    if version[1] > MAX_SIDECAR_BYTES:
        raise SidecarError(f"{path} is larger than {MAX_SIDECAR_BYTES >> 20} MiB")
    try:
        return _read(path, version)
    except SidecarError:
        raise
    except OSError as err:
        raise SidecarError(f"cannot read {path}: {err}") from err
