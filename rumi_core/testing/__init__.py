"""Test helpers shipped with rumi_core, for its own tests and those of other packages.

* :func:`synthetic_scene` and :func:`synthetic_cube` generate Sentinel-2-like
  rasters (spatial structure, noise, cloud-like patches), deterministic per seed.
* :func:`random_samples` draws arrays of any of the 21 sample encodings.
* :class:`CountingSource` wraps a byte source and records every range asked of it.
"""

from __future__ import annotations

from rumi_core.testing._sources import CountingSource as CountingSource
from rumi_core.testing._synthetic import random_samples as random_samples
from rumi_core.testing._synthetic import synthetic_cube as synthetic_cube
from rumi_core.testing._synthetic import synthetic_scene as synthetic_scene

__all__ = ["CountingSource", "random_samples", "synthetic_cube", "synthetic_scene"]
