"""The path part of an input's href, as the planning reads names and folders from it.

A scene's href is a local path (``/``, or ``\\`` on Windows), a URL, or a
signed URL whose query (``?X-Goog-Signature=...``) names nothing: band
tokens, dates, scene IDs and sidecar folders are all read from the path
alone, with ``/`` separators.
"""

from __future__ import annotations

__all__ = ["href_path"]


def href_path(href: str) -> str:
    """``href`` without its query, with ``/`` separators.

    >>> href_path("https://host/T33UUU_20230612_B04.tif?X-Goog-Signature=abc")
    'https://host/T33UUU_20230612_B04.tif'
    >>> href_path("C:\\\\data\\\\scene_B04.tif")
    'C:/data/scene_B04.tif'
    """
    return href.split("?", 1)[0].replace("\\", "/")
