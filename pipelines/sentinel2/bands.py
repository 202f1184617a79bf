"""The Sentinel-2 L2A band table: ids, common names, wavelengths, resolution groups, asset keys.

One table serves every public catalogue. Earth Search v1 names its assets by
common name (``red``, ``nir``, ``rededge1``, ``swir16``, ``scl``...; the
``-jp2`` copies are ignored), the Planetary Computer and the Copernicus Data
Space Ecosystem by band id (``B04``, ``B8A``, ``SCL``); :func:`band_for_asset`
maps both to a :class:`S2Band`.

Central wavelengths, in nanometres, per platform:

* S2A and S2B: ESA, *Sentinel-2 Spectral Response Functions*,
  COPE-GSEG-EOPG-TN-15-0007, v3.0 (2017), the per-band centres
  (``S2A_SR_AV_Bn`` / ``S2B_SR_AV_Bn`` columns).
* S2C: the nominal MSI band centres of the ESA *Sentinel-2 User Handbook*
  (v1.2, 2015, table "MSI spectral bands"), which is what the mission
  specifies for every unit; S2C's measured response functions (v4.0 of
  the document above) were not at hand offline, so its values here are the
  nominal ones.

The trailer's band text follows the specification's recommended form (section
*Band descriptions*): name, common name, then the wavelength of **every
platform in the table**, ``B04, red, 664.6nm (S2A) / 664.9nm (S2B) / 665nm (S2C)``.
One text per band whatever platforms a cube holds, so that acquisitions of S2A,
S2B and S2C stack into one cube and two cubes of one tile and group carry the
same texts. The STAC item's ``eo:common_name`` and ``eo:center_wavelength``
are read from that text by the catalogue (:func:`catalog.bands.band_from_text`):
the centre is the first one listed, S2A's.

>>> band_for_asset("nir08").id, band_for_asset("B8A").id
('B8A', 'B8A')
>>> band_text(BANDS["B04"])
'B04, red, 664.6nm (S2A) / 664.9nm (S2B) / 665nm (S2C)'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "BANDS",
    "PLATFORMS",
    "S2Band",
    "asset_resolution",
    "band_for_asset",
    "band_text",
    "select_bands",
]

PLATFORMS: Final = ("S2A", "S2B", "S2C")
"""The platforms of the table, in the order their wavelengths appear in a band text."""


@dataclass(frozen=True)
class S2Band:
    """One Sentinel-2 L2A band."""

    id: str
    """Band id, ``B01``..``B12``, ``B8A`` or ``SCL``."""
    common_name: str | None
    """EO extension common name (v2.0 vocabulary), None for SCL."""
    group: str
    """Resolution group: ``10m``, ``20m``, ``60m``, or ``scl`` (its own uint8 cube on the 20 m grid)."""
    wavelengths_nm: tuple[float, ...] = ()
    """Central wavelength per platform of :data:`PLATFORMS`; empty for SCL."""
    earth_search: str = ""
    """Earth Search v1 asset key."""

    @property
    def resolution(self) -> int:
        """Native ground sampling distance in metres."""
        return 20 if self.group == "scl" else int(self.group.removesuffix("m"))


def _b(id_: str, common: str | None, group: str, es: str, *nm: float) -> S2Band:
    return S2Band(id_, common, group, tuple(nm), es)


BANDS: Final[dict[str, S2Band]] = {
    b.id: b
    for b in (
        #  id     common name    group  Earth Search  S2A     S2B     S2C
        _b("B01", "coastal", "60m", "coastal", 442.7, 442.3, 443.0),
        _b("B02", "blue", "10m", "blue", 492.4, 492.1, 490.0),
        _b("B03", "green", "10m", "green", 559.8, 559.0, 560.0),
        _b("B04", "red", "10m", "red", 664.6, 664.9, 665.0),
        _b("B05", "rededge071", "20m", "rededge1", 704.1, 703.8, 705.0),
        _b("B06", "rededge075", "20m", "rededge2", 740.5, 739.1, 740.0),
        _b("B07", "rededge078", "20m", "rededge3", 782.8, 779.7, 783.0),
        _b("B08", "nir", "10m", "nir", 832.8, 832.9, 842.0),
        _b("B8A", "nir08", "20m", "nir08", 864.7, 864.0, 865.0),
        _b("B09", "nir09", "60m", "nir09", 945.1, 943.2, 945.0),
        _b("B11", "swir16", "20m", "swir16", 1613.7, 1610.4, 1610.0),
        _b("B12", "swir22", "20m", "swir22", 2202.4, 2185.7, 2190.0),
        _b("SCL", None, "scl", "scl"),
    )
}
"""Every L2A band by id, in band order within each group (B10, cirrus, is not in L2A products)."""

_BY_ASSET: Final = {**{b.id.lower(): b for b in BANDS.values()}, **{b.earth_search: b for b in BANDS.values()}, "b8a": BANDS["B8A"]}


def band_for_asset(key: str) -> S2Band | None:
    """The band an asset key names, in Earth Search (``red``) or PC/CDSE (``B04``) style; None otherwise.

    CDSE suffixes keys with the resolution (``B04_10m``, ``SCL_20m``); the
    suffix is dropped. Earth Search's ``-jp2`` copies name no band (the COGs do).

    >>> band_for_asset("red-jp2") is None, band_for_asset("B04_10m").id, band_for_asset("SCL").group
    (True, 'B04', 'scl')
    """
    if key.endswith("-jp2"):
        return None
    resolution = asset_resolution(key)
    base = key.lower().removesuffix(f"_{resolution}m") if resolution else key.lower()
    return _BY_ASSET.get(base)


def asset_resolution(key: str) -> int | None:
    """The resolution in metres a CDSE asset key ends in (``B01_60m``: 60), or None.

    >>> asset_resolution("B01_60m"), asset_resolution("SCL_20m"), asset_resolution("red")
    (60, 20, None)
    """
    for resolution in (10, 20, 60):
        if key.lower().endswith(f"_{resolution}m"):
            return resolution
    return None


def _nm(value: float) -> str:
    return f"{value:g}nm"


def band_text(band: S2Band) -> str:
    """The trailer text of a band: ``B04, red, 664.6nm (S2A) / ...``; ``SCL, scene classification`` for SCL."""
    if not band.wavelengths_nm:
        return f"{band.id}, scene classification"
    waves = " / ".join(f"{_nm(w)} ({p})" for w, p in zip(band.wavelengths_nm, PLATFORMS, strict=True))
    return f"{band.id}, {band.common_name}, {waves}"


def select_bands(selectors: str | None) -> tuple[S2Band, ...]:
    """The bands a ``--bands`` value names (ids, common names or asset keys, comma-separated); all when None.

    Raises:
        ValueError: a selector names no Sentinel-2 L2A band.

    >>> [b.id for b in select_bands("red,nir,scl")]
    ['B04', 'B08', 'SCL']
    """
    if not selectors:
        return tuple(BANDS.values())
    out: list[S2Band] = []
    for raw in selectors.split(","):
        word = raw.strip()
        band = band_for_asset(word) or next((b for b in BANDS.values() if b.common_name == word.lower()), None)
        if band is None:
            raise ValueError(f"{word!r} is no Sentinel-2 L2A band; expected ids (B04), common names (red) or asset keys (scl)")
        if band not in out:
            out.append(band)
    return tuple(b for b in BANDS.values() if b in out)
