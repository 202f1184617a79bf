"""Band names: where each band text of a cube comes from.

A rumi file stores one unique text per band
(specification section *Trailer*, band descriptions). The pipeline takes it,
in this order, from

1. the GeoTIFF band description;
2. the STAC asset (its ``eo:bands`` name, else its key);
3. the band token of a single-band file's name (``T33UUU_20170216_B04.tif``
   gives ``B04``);
4. ``band N``, N counting from 1 within the file; when every file of a
   cube's single-band band shares a name (:func:`stem_name`: the parts of
   the stem that hold no digit, ``fmask`` for ``LE70350322008118EDC00_fmask.tif``
   on every date), the cube's band takes that name once the scenes are
   grouped (``pipelines.planning.grouping``). Several such files of one
   directory, time, raster and scene ID (:func:`stem_id`) whose stem names
   differ are quantities of one scene (Landsat Collection 2's ``QA_PIXEL``
   and ``ST_TRAD``): each takes its stem's name before grouping
   (``grouping.name_quantities``).

Single-band files that differ only by their band token are the bands of one
acquisition: :func:`stack_id` names that acquisition, and :func:`natural_key`
orders its bands (``B8`` before ``B8A`` before ``B10``). The module is pure:
no I/O.

>>> band_token("s3://b/LE70350322008118EDC00_b3.tif")
'b3'
>>> stack_id("/data/T33UUU_20170216T102101_B8A.jp2")
'/data/T33UUU_20170216T102101'
>>> band_token("R20m/T33UUU_20230612T102031_B8A_20m.jp2"), stack_id("R20m/T33UUU_20230612T102031_B8A_20m.jp2")
('B8A', 'R20m/T33UUU_20230612T102031')
>>> band_token("S2A_33UUU_20230612_0_L2A/B02.tif"), stack_id("S2A_33UUU_20230612_0_L2A/B02.tif")
('B02', 'S2A_33UUU_20230612_0_L2A/')
>>> band_token("LC08_L1TP_033033_20170506_20170515_01_T1_sr_band1.tif"), band_token("x_sensor_azimuth_band4.tif")
('band1', None)
>>> sorted(["B10", "B8A", "B08", "B1"], key=natural_key)
['B1', 'B08', 'B8A', 'B10']
"""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING, Final

from pipelines.planning.hrefs import href_path

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["BAND_TOKEN", "band_name", "band_token", "directory", "natural_key", "stack_id", "stem_id", "stem_name", "unique_band_texts"]

BAND_TOKEN: Final = re.compile(
    r"(?:^|[_\-.])(?P<token>[Bb](?:\d{1,2}[A-Za-z]?(?:_VCID_[12])?|QA)|(?<!azimuth_)(?<!zenith_)[Bb]and_?\d{1,2})(?:_\d{1,4}m)?$"
)
"""A band token at the end of a file stem: ``_B04``, ``_b3``, ``_B8A``, ``-B11``, ``_BQA``,
Landsat 7's two gains of its thermal band, ``_B6_VCID_1`` and ``_B6_VCID_2``, and
``_band3`` or ``_band_3``.

The last is how USGS ESPA names Landsat Collection 1 products
(``<product ID>_sr_band1.tif``, ``_toa_band1``, ``_bt_band10``): the
acquisition is then the stem before the token, one per product. ESPA's
per-band angle layers (``_sensor_azimuth_band4``, ``_solar_zenith_band4``)
name the band they were computed for, not a band of their own: they are
no token, and stay quantities of their scene named by their stems.

It may be followed by the pixel size in metres, as the files of a Sentinel-2
Level-2A SAFE product are (``T33UUU_20230612T102031_B02_10m.jp2``); the
token is then ``B02`` and the acquisition the stem before it. It may also be
the whole stem, as in a folder of Earth Search's Sentinel-2 COGs
(``S2A_33UUU_20230612_0_L2A/B02.tif``), whose acquisition is the folder.
"""

_DIGITS: Final = re.compile(r"(\d+)")
_STEM_PARTS: Final = re.compile(r"[_\-. ]+")


def _stem(href: str) -> str:
    base = posixpath.basename(href_path(href))
    return base.rsplit(".", 1)[0] if "." in base else base


def band_token(href: str) -> str | None:
    """Return the band token at the end of a file name, or None."""
    match = BAND_TOKEN.search(_stem(href))
    return match.group("token") if match else None


def directory(href: str) -> str:
    """The folder of a path or URL, without a query, with ``/`` separators ("" for a bare name)."""
    return href_path(href).rpartition("/")[0]


def stack_id(href: str) -> str:
    """Return the acquisition a file belongs to: its path without extension and band token.

    Files without a band token are an acquisition of their own.
    """
    folder = directory(href)
    stem = _stem(href)
    match = BAND_TOKEN.search(stem)
    if match:
        stem = stem[: match.start()]
    return f"{folder}/{stem}" if folder else stem


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders digit runs by value and the rest case-insensitively."""
    parts = _DIGITS.split(text)
    return tuple((1, int(p)) if i % 2 else (0, p.lower()) for i, p in enumerate(parts) if p)


def stem_name(href: str) -> str | None:
    """Name a file's one quantity after its stem: the parts without digits, joined by ``_``; None if none.

    Parts with digits are dates, scene IDs and counters, which differ from
    file to file of one series.

    >>> stem_name("lsts/LE70350322008118EDC00/LE70350322008118EDC00_fmask.tif")
    'fmask'
    >>> stem_name("/data/2021/ndvi_20210517.tif"), stem_name("/data/20210517.tif")
    ('ndvi', None)
    """
    parts = [p for p in _STEM_PARTS.split(_stem(href)) if p and not any(c.isdigit() for c in p)]
    return "_".join(parts) or None


def stem_id(href: str) -> str | None:
    """The parts of a file's stem that hold a digit, joined by ``_``: the scene ID and dates :func:`stem_name` leaves out; None if none.

    >>> stem_id("LC08_L2SP_035032_20230612_20230620_02_T1_QA_PIXEL.TIF")
    'LC08_L2SP_035032_20230612_20230620_02_T1'
    >>> stem_id("/data/ndvi.tif") is None
    True
    """
    parts = [p for p in _STEM_PARTS.split(_stem(href)) if any(c.isdigit() for c in p)]
    return "_".join(parts) or None


def band_name(*, description: str | None, hint: str | None, token: str | None, index: int) -> str:
    """Return the text of band ``index`` (1-based) of a file, by the precedence above.

    >>> band_name(description=None, hint=None, token=None, index=2)
    'band 2'
    """
    for candidate in (description, hint, token):
        if candidate and candidate.strip():
            return candidate.strip()
    return f"band {index}"


def unique_band_texts(texts: Sequence[str]) -> tuple[str, ...]:
    """Make band texts unique by suffixing repeats with their position.

    A file's band texts MUST differ (specification, *Band descriptions*). A
    repeated text keeps its first occurrence; each later one becomes
    ``"<text> (band N)"`` with N its 1-based position.

    >>> unique_band_texts(["Red", "NIR", "Red"])
    ('Red', 'NIR', 'Red (band 3)')
    """
    seen: set[str] = set()
    out: list[str] = []
    for i, text in enumerate(texts, start=1):
        candidate = text if text not in seen else f"{text} (band {i})"
        seen.add(candidate)
        out.append(candidate)
    return tuple(out)
