"""What an input's href names: the path planning reads names and folders from, and the file it is.

A scene's href is a local path (``/``, or ``\\`` on Windows), a URL, or a
signed URL whose query (``?X-Goog-Signature=...``) names nothing: band
tokens, dates, scene IDs and sidecar folders are all read from the path
alone, with ``/`` separators (:func:`href_path`).

Two hrefs of one file are one input (:func:`input_identity`): a local file
through a symbolic link, and a URL signed at another time. A cube's name
hashes its inputs' identities, so neither a link nor a signing date changes
it, and a signature (a credential, valid until it expires) is kept out of
the manifest (:func:`catalog.credentials.unsigned`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from catalog.credentials import QUERIED, unsigned
from pipelines.archives import archive_of

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["href_path", "input_identity", "one_href_per_file"]


def href_path(href: str) -> str:
    """``href`` without its query, with ``/`` separators.

    Only an ``http(s)://`` URL (or GDAL's ``vrt://``) has a query: in a local
    path, an archive's member or a ``gs://`` object name, ``?`` is a
    character of the name.

    >>> href_path("https://host/T33UUU_20230612_B04.tif?X-Goog-Signature=abc")
    'https://host/T33UUU_20230612_B04.tif'
    >>> href_path("C:\\\\data\\\\scene_B04.tif"), href_path("/data/why?_B04.tif")
    ('C:/data/scene_B04.tif', '/data/why?_B04.tif')
    """
    path = href.split("?", 1)[0] if QUERIED.match(href) else href
    return path.replace("\\", "/")


def input_identity(href: str) -> str:
    """The file an href names: a local path (or an archive's, for its member) with its links resolved, a URL :func:`unsigned`.

    >>> input_identity("https://host/a.tif?X-Amz-Signature=ab")
    'https://host/a.tif'
    """
    if "://" in href:
        return unsigned(href)
    archive = archive_of(href)
    if archive is not None:  # a member of an archive: the archive's links resolved
        return href.replace(f"{{{archive}}}", f"{{{os.path.realpath(archive)}}}", 1)
    return os.path.realpath(href)


def one_href_per_file(hrefs: Iterable[str]) -> dict[str, str]:
    """One href of each file, by its :func:`input_identity`: the file's own path if given, else its shallowest link, then by name.

    A ``latest -> 2023-06-12`` link, a link to a parent that ``**`` follows, or
    a folder given beside a link to it would give one file several hrefs, which
    planning would take for several acquisitions at one time (duplicates).

    >>> one_href_per_file(["https://h/a.tif?X-Goog-Signature=1", "https://h/a.tif?X-Goog-Signature=2"])
    {'https://h/a.tif': 'https://h/a.tif?X-Goog-Signature=1'}
    """
    chosen: dict[str, tuple[bool, int, str]] = {}
    for href in hrefs:
        identity = input_identity(href)
        rank = (href != identity, href.count("/"), href)
        chosen[identity] = min(chosen.get(identity, rank), rank)
    return {identity: rank[2] for identity, rank in chosen.items()}
