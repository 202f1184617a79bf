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
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["href_path", "input_identity", "one_href_per_file", "unsigned"]

_SIGNING: Final = re.compile(
    r"x-goog-.*|x-amz-.*|googleaccessid|awsaccesskeyid|expires|signature|key-pair-id|policy"  # GCS, S3 (v2, v4), CloudFront
    r"|sig|se|st|sp|sv|sr|ss|srt|spr|si|ses|sdd|skoid|sktid|skt|ske|sks|skv",  # Azure shared access signatures
    re.IGNORECASE,
)
"""Query parameters of URL signing schemes: they grant access for a time, and name no resource."""


def href_path(href: str) -> str:
    """``href`` without its query, with ``/`` separators.

    >>> href_path("https://host/T33UUU_20230612_B04.tif?X-Goog-Signature=abc")
    'https://host/T33UUU_20230612_B04.tif'
    >>> href_path("C:\\\\data\\\\scene_B04.tif")
    'C:/data/scene_B04.tif'
    """
    return href.split("?", 1)[0].replace("\\", "/")


def unsigned(href: str) -> str:
    """A URL without the query parameters of a signing scheme (GCS, S3, CloudFront, Azure SAS); any other href as given.

    >>> unsigned("https://host/a.tif?X-Goog-Date=20240101T000000Z&X-Goog-Signature=ab&version=2")
    'https://host/a.tif?version=2'
    >>> unsigned("https://acct.blob.core.windows.net/c/a.tif?st=2024-01-01&se=2024-01-02&sp=r&sv=2021-06-08&sr=b&sig=x")
    'https://acct.blob.core.windows.net/c/a.tif'
    """
    parts = urlsplit(href)
    if not parts.query or not parts.scheme:
        return href
    kept = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not _SIGNING.fullmatch(k)]
    return urlunsplit(parts._replace(query=urlencode(kept)))


def input_identity(href: str) -> str:
    """The file an href names: a local path with its links resolved (:func:`os.path.realpath`), a URL :func:`unsigned`.

    >>> input_identity("https://host/a.tif?X-Amz-Signature=ab")
    'https://host/a.tif'
    """
    if "://" in href:
        return unsigned(href)
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
