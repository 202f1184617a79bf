"""Local folders given as inputs: the files below one, through the folders linked into it.

``os.walk`` does not enter a linked folder unless told to, and told to, it
enters a link to a folder above it for ever. A folder of
``latest -> 2023-06-12`` links, or a month linked in from another disk,
would lose its scenes without a word, where a ``**`` glob finds them; so
links are followed, and each real folder searched once.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["folder_files"]


def folder_files(top: str) -> Iterator[str]:
    """The paths of the files below folder ``top``, through linked folders (``feb -> /archive/2023/feb``) too, as ``**`` finds them.

    A folder reached again (a link to a folder above it, two links to one) is searched once.
    """
    seen: set[str] = set()
    for root, folders, names in os.walk(top, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:
            folders[:] = []
            continue
        seen.add(real)
        yield from (os.path.join(root, name) for name in names)
