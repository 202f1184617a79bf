"""Band selection by name: ``rumi_core.read(..., bands=["red", "nir"])``.

A file's band texts are in its trailer (specification section *Band
descriptions*). Matching a name such as ``red`` against them takes more than
comparing text: EO common names and their aliases (``NIR``, ``SWIR1``...)
live in the catalogue package, which rumi_core must not import. The matcher
is therefore found through the ``rumi.band_names`` entry-point group (the
catalog package registers ``catalog.selectors:band_positions_for_texts``),
so the Python API and ``rumi read`` accept the same names by running the same
function; installed metadata is the one place both packages meet, as for
URL sources (:mod:`rumi_core.sources`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rumi_core.errors import SelectionError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["BAND_NAME_ENTRY_POINTS", "band_positions"]

BAND_NAME_ENTRY_POINTS = "rumi.band_names"
"""Entry-point group of the band-name matcher, ``(selectors, texts) -> positions``."""


def band_positions(selectors: Sequence[int | str], texts: Sequence[str]) -> list[int]:
    """Resolve band positions and names against a file's band texts.

    Raises:
        SelectionError: a name matches no band or several, or no installed
            package matches band names.
    """
    from importlib.metadata import entry_points

    found = list(entry_points(group=BAND_NAME_ENTRY_POINTS, name="match"))
    if not found:
        raise SelectionError("band names need rumi-forge's catalog package installed; give band positions instead")
    positions: list[int] = found[0].load()(list(selectors), list(texts))
    return positions
