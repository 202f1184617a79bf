"""What in a URL is a credential, and taking it out of what is shown or written.

A signed URL carries a signature in its query (GCS and S3 V4's
``X-Goog-*``/``X-Amz-*``, the V2 schemes' ``Signature``, CloudFront's
``Policy``, an Azure shared access signature's ``sig``), and a URL may carry a
password (``https://user:password@host/``). Both are valid until they expire
or are changed, so neither belongs in an error message, a log or a file
others read: :func:`unsigned` takes them out of one URL (a run's manifest
records its inputs so), :func:`redacted` out of every URL and query in a text
(an error message that quotes a library's, which names the URL its own way).

A parameter name that is a common word (``st``, ``se``, ``expires``,
``signature``) counts as a signature's part only beside the parameter that
marks its scheme: on another URL it may tell two files apart (``?st=v1``).
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import unquote, urlsplit, urlunsplit

__all__ = ["QUERIED", "redacted", "unsigned"]

QUERIED: Final = re.compile(r"(?:https?|vrt)://", re.IGNORECASE)
"""The URLs that may have a query: HTTP(S), and GDAL's ``vrt://`` connection strings (``?outsize=...``).
In a ``gs://`` object name or a local path, ``?`` is a character of the name."""

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
"""Signing schemes whose parameter names are common words, each by the parameter that marks it."""

_QUERY_IN_TEXT: Final = re.compile(r"\?([^\s\"'<>()]*[^\s\"'<>().,;:!?])")
"""A query inside a text (a library may name a file by its URL, or by its name and query): up to white space, a quote
or a bracket, and not its closing punctuation."""

_PASSWORD_IN_TEXT: Final = re.compile(r"(?P<start>\b[a-z][a-z0-9+.-]*://[^\s/@:]*):[^\s/@]*@", re.IGNORECASE)
"""The password of a URL's user information, inside a text."""


def unsigned(url: str) -> str:
    """``url`` without the query parameters of a signing scheme, and without a password; any other href as given.

    >>> unsigned("https://host/a.tif?X-Goog-Date=20240101T000000Z&X-Goog-Signature=ab&version=2")
    'https://host/a.tif?version=2'
    >>> unsigned("https://acct.blob.core.windows.net/c/a.tif?st=2024-01-01&se=2024-01-02&sp=r&sv=2021-06-08&sr=b&sig=x")
    'https://acct.blob.core.windows.net/c/a.tif'
    >>> unsigned("https://me:secret@host/a.tif"), unsigned("gs://b/why?X-Goog-Signature=1.tif")
    ('https://me@host/a.tif', 'gs://b/why?X-Goog-Signature=1.tif')
    """
    if not QUERIED.match(url):
        return url
    parts = urlsplit(url)
    if parts.password is not None:
        parts = parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", "@", 1))
    if parts.query:
        parts = parts._replace(query=_without_signing(parts.query))
    return urlunsplit(parts)


def redacted(text: str) -> str:
    """``text`` without the signing parameters of the queries in it and the passwords of the URLs in it.

    Other text is kept as written, a ``?`` in a file's name too.

    >>> redacted("https://h/a.tif?X-Goog-Signature=s&v=2, as b.tif?X-Goog-Signature=t, and why?_B04.tif: why?")
    'https://h/a.tif?v=2, as b.tif, and why?_B04.tif: why?'
    >>> redacted("GET http://alice:s3cr3t@host/x.rumi failed")
    'GET http://alice@host/x.rumi failed'
    """

    def kept(query: re.Match[str]) -> str:
        rest = _without_signing(query.group(1))
        return f"?{rest}" if rest else ""

    return _QUERY_IN_TEXT.sub(kept, _PASSWORD_IN_TEXT.sub(r"\g<start>@", text))


def _without_signing(query: str) -> str:
    """``query`` without the parameters of a signing scheme.

    The query's own text, parameter by parameter: parsing and re-encoding it
    would show another URL than the one read (``a=1;b=2``, ``?token``).
    """
    params = query.split("&")
    names = [unquote(param.split("=", 1)[0]).lower() for param in params]
    signing = {name for name in names if _PREFIXED.fullmatch(name)}
    for marker, scheme in _SCHEMES:
        if marker in names:
            signing |= scheme
    return "&".join(param for param, name in zip(params, names, strict=True) if name not in signing)
