"""Test helpers shipped with rumi_core, for its own tests and those of other packages.

* :func:`synthetic_scene` and :func:`synthetic_cube` generate Sentinel-2-like
  rasters (spatial structure, noise, cloud-like patches), deterministic per seed.
* :func:`random_samples` draws arrays of any of the 21 sample encodings.
* :class:`CountingSource` wraps a byte source and records every range asked of it.
* :class:`FileParts`, :class:`TrailerParts` and :class:`BlobParts` take a file,
  trailer or header blob apart and rebuild it with exactly one rule broken
  (:func:`patch_value`, :func:`value_offset`, :func:`flip_bit` and
  :func:`pack_bits` patch bytes in place).
* :class:`VirtualEnvironment` builds and reuses a virtual environment of its
  own for a peer tool (:func:`rumi_eo_environment`: the reference
  implementation, rumi-eo :data:`RUMI_EO_VERSION`).
"""

from __future__ import annotations

from rumi_core.testing._mutate import BlobParts as BlobParts
from rumi_core.testing._mutate import FileParts as FileParts
from rumi_core.testing._mutate import RawEntry as RawEntry
from rumi_core.testing._mutate import TrailerParts as TrailerParts
from rumi_core.testing._mutate import flip_bit as flip_bit
from rumi_core.testing._mutate import pack_bits as pack_bits
from rumi_core.testing._mutate import patch_value as patch_value
from rumi_core.testing._mutate import value_offset as value_offset
from rumi_core.testing._sources import CountingSource as CountingSource
from rumi_core.testing._synthetic import random_samples as random_samples
from rumi_core.testing._synthetic import synthetic_cube as synthetic_cube
from rumi_core.testing._synthetic import synthetic_scene as synthetic_scene
from rumi_core.testing._venvs import RUMI_EO_VERSION as RUMI_EO_VERSION
from rumi_core.testing._venvs import VirtualEnvironment as VirtualEnvironment
from rumi_core.testing._venvs import rumi_eo_environment as rumi_eo_environment

__all__ = [
    "RUMI_EO_VERSION",
    "BlobParts",
    "CountingSource",
    "FileParts",
    "RawEntry",
    "TrailerParts",
    "VirtualEnvironment",
    "flip_bit",
    "pack_bits",
    "patch_value",
    "random_samples",
    "rumi_eo_environment",
    "synthetic_cube",
    "synthetic_scene",
    "value_offset",
]
