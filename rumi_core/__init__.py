"""rumi_core: the rumi 0.1.0 raster format.

Write an Image ``(B, Y, X)`` or Cube ``(T, B, Y, X)`` as a canonical, tiled
``.rumi`` file of self-contained OpenZL frames; build its header blob; read
any window statelessly from the blob and byte ranges; validate a file against
every MUST of the specification (``shared/spec/rumi-0.1.0.md``).

This package knows nothing of Beam, STAC or clouds.
"""

from __future__ import annotations

import logging

import lazy_loader

# Every public name is listed once, in ``__init__.pyi``: type checkers read the
# stub, and lazy_loader parses it to load each name on first use (PEP 562), so
# ``rumi --version`` and commands that need a few modules do not pay for every
# codec import (ml_dtypes alone takes over a second). lazy_loader also keeps
# ``rumi_core.info``, ``rumi_core.validate`` and ``rumi_core.assemble`` the
# functions after their submodules of the same name are imported.
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

logging.getLogger(__name__).addHandler(logging.NullHandler())
