"""What an input's href names: the path planning reads names and folders from, and the file it is.

A scene's href is a local path (``/``, or ``\\`` on Windows), a URL, or a
signed URL whose query (``?X-Goog-Signature=...``) names nothing: band
tokens, dates, scene IDs and sidecar folders are all read from the path
alone, with ``/`` separators (:func:`href_path`).

Two hrefs of one file are one input (:func:`input_identity`): a local file
through a symbolic link, and a URL signed at another time. A cube's name
hashes its inputs' identities, so neither a link nor a signing date changes
it, and a signature (a credential, valid until it expires) is kept out of
the manifest (:func:`unsigned`).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Final
from urllib.parse import unquote, urlsplit, urlunsplit

from pipelines.archives import archive_of

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["href_path", "input_identity", "one_href_per_file", "unsigned", "unsigned_text"]

_QUERIED: Final = re.compile(r"(?:https?|vrt)://", re.IGNORECASE)
"""The hrefs that may have a query: URLs over HTTP(S), and GDAL's ``vrt://`` connection strings (``?outsize=...``)."""

_QUERY_IN_TEXT: Final = re.compile(r"\?([^\s\"'<>()]*[^\s\"'<>().,;:!?])")
"""A query inside a message (GDAL names a file by its URL, or by its name and query): up to white space, a quote or
a bracket, and not its closing punctuation."""

_PREFIXED: Final = re.compile(r"x-goog-.*|x-amz-.*", re.IGNORECASE)
"""Query parameters of the GCS (V4) and S3 (V4) signing schemes, whose prefixes no other parameter uses."""

_AZURE_SAS: Final = frozenset(
    {"sig", "se", "st", "sp", "sv", "sr", "ss", "srt", "spr", "si", "ses", "sdd", "skoid", "sktid", "skt", "ske", "sks", "skv"}
)

_SCHEMES: Final = (
    ("googleaccessid", frozenset({"googleaccessid", "expires", "signature"})),  # GCS, V2
    ("awsaccesskeyid", frozenset({"awsaccesskeyid", "expires", "signature"})),  # S3, V2
    ("key-pair-id", frozenset({"key-pair-id", "expires", "signature", "policy"})),  # CloudFront
    ("sig", _AZURE_SAS),  # Azure shared access signatures
)
"""Signing schemes whose parameter names are common words, each by the parameter that marks it.

A name such as ``st``, ``se``, ``sig`` or ``expires`` is a signature's part
only beside the parameter that marks its scheme: on another URL it may tell
two files apart (``?st=v1``, ``?st=v2``), which :func:`input_identity` must
not merge (one of them would be dropped as a duplicate of the other).
"""


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
    path = href.split("?", 1)[0] if _QUERIED.match(href) else href
    return path.replace("\\", "/")


def unsigned(href: str) -> str:
    """A URL without the query parameters of a signing scheme (GCS, S3, CloudFront, Azure SAS); any other href as given.

    Only the hrefs :func:`href_path` gives a query have one: in a ``gs://``
    object name or a local path, ``?`` and what follows are the name's own.

    >>> unsigned("https://host/a.tif?X-Goog-Date=20240101T000000Z&X-Goog-Signature=ab&version=2")
    'https://host/a.tif?version=2'
    >>> unsigned("https://acct.blob.core.windows.net/c/a.tif?st=2024-01-01&se=2024-01-02&sp=r&sv=2021-06-08&sr=b&sig=x")
    'https://acct.blob.core.windows.net/c/a.tif'
    """
    parts = urlsplit(href)
    if not parts.query or not _QUERIED.match(href):
        return href
    return urlunsplit(parts._replace(query=_without_signing(parts.query)))


def _without_signing(query: str) -> str:
    """``query`` without the parameters of a signing scheme.

    The query's own text, parameter by parameter: parsing and re-encoding it
    would record another URL than the one read (``a=1;b=2``, ``?token``).
    """
    params = query.split("&")
    names = [unquote(param.split("=", 1)[0]).lower() for param in params]
    signing = {name for name in names if _PREFIXED.fullmatch(name)}
    for marker, scheme in _SCHEMES:
        if marker in names:
            signing |= scheme
    return "&".join(param for param, name in zip(params, names, strict=True) if name not in signing)


def unsigned_text(text: str) -> str:
    """``text`` without the signing parameters of the queries in it: a message that names inputs, to be written where
    others read it. Other text is kept as written, a ``?`` in a file's name too.

    >>> unsigned_text("https://h/a.tif?X-Goog-Signature=s&v=2, as b.tif?X-Goog-Signature=t, and why?_B04.tif: why?")
    'https://h/a.tif?v=2, as b.tif, and why?_B04.tif: why?'
    """

    def kept(query: re.Match[str]) -> str:
        rest = _without_signing(query.group(1))
        return f"?{rest}" if rest else ""

    return _QUERY_IN_TEXT.sub(kept, text)


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
