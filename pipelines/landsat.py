"""Radiometry of Landsat Collection 2 Level-2 files, from their product's MTL metadata.

A Collection 2 Level-2 product stores surface reflectance (``SR_B<n>``) and
surface temperature (``ST_B<n>``) as integers: reflectance =
``DN * 2.75e-05 - 0.2``, temperature = ``DN * 0.00341802 + 149.0`` kelvin.
The factors are in the product's ``<product ID>_MTL.json`` (or ``_MTL.txt``)
beside the files, not in its GeoTIFFs, so a cube of them would record scale
1 and offset 0. :func:`file_radiometry` gives such a file the ``(scale,
offset, unit)`` its MTL declares (``REFLECTANCE_MULT_BAND_<n>`` and
``REFLECTANCE_ADD_BAND_<n>``; ``TEMPERATURE_MULT_BAND_ST_B<n>`` and
``TEMPERATURE_ADD_BAND_ST_B<n>``, in K). Other layers (``QA_PIXEL``, the
``ST_*`` intermediates, whose factors the MTL does not give) and products
without an MTL keep what their files say.

>>> text = "GROUP = LEVEL2_SURFACE_REFLECTANCE_PARAMETERS\\n  REFLECTANCE_MULT_BAND_1 = 2.75E-05\\nEND_GROUP"
>>> mtl_groups(text)
{'LEVEL2_SURFACE_REFLECTANCE_PARAMETERS': {'REFLECTANCE_MULT_BAND_1': '2.75E-05'}}
"""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING, Any, Final

from catalog.json_shape import json_value
from pipelines.planning.hrefs import href_path
from pipelines.sidecars import MetadataError, parsed_sidecar

if TYPE_CHECKING:
    from pipelines.planning.scene import Radiometry

__all__ = ["file_radiometry", "mtl_groups"]

_LEVEL_2: Final = re.compile(
    r"^(?P<id>L[COTEM]0\d_L2S[PR]_\d{6}_\d{8}_\d{8}_\d{2}_[A-Z0-9]{2})_(?P<kind>SR|ST)_B(?P<band>\d{1,2})\.TIF$", re.IGNORECASE
)
"""A Level-2 surface reflectance or temperature band: product ID, kind and band number."""

_TEXT_LINE: Final = re.compile(r"^\s*(?P<key>[A-Z0-9_]+)\s*=\s*\"?(?P<value>[^\"\r\n]*)\"?\s*$")
"""``KEY = value`` in an ``_MTL.txt`` (ODL); ``GROUP = name`` and ``END_GROUP = name`` delimit groups."""

_GROUPS: Final = {"SR": "LEVEL2_SURFACE_REFLECTANCE_PARAMETERS", "ST": "LEVEL2_SURFACE_TEMPERATURE_PARAMETERS"}
"""The MTL group holding each kind's factors. The Level-1 group ``LEVEL1_RADIOMETRIC_RESCALING`` of the same
file has keys of the same names (``REFLECTANCE_MULT_BAND_1``, top-of-atmosphere), so keys are read per group."""


def mtl_groups(text: str) -> dict[str, dict[str, str]]:
    """The parameters of an ``_MTL.txt`` or ``_MTL.json``, by innermost group and key.

    Raises:
        MetadataError: JSON that does not parse.
    """
    groups: dict[str, dict[str, str]] = {}
    if not text.lstrip().startswith("{"):
        stack: list[str] = []
        for line in text.splitlines():
            match = _TEXT_LINE.match(line)
            if match is None:
                continue
            key, value = match.group("key"), match.group("value").strip()
            if key == "GROUP":
                stack.append(value)
            elif key == "END_GROUP":
                stack = stack[:-1]
            elif stack:
                groups.setdefault(stack[-1], {})[key] = value
        return groups
    try:
        document = json_value(text)
    except ValueError as err:
        raise MetadataError(str(err).removeprefix("is ")) from err

    def walk(name: str, node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(value, dict):
                    walk(str(key), value)
                else:
                    groups.setdefault(name, {})[str(key)] = str(value)

    walk("", document)
    return groups


def _factor(parameters: dict[str, str], key: str, where: str) -> float:
    if key not in parameters:
        raise MetadataError(f"{where} has no {key}")
    try:
        return float(parameters[key])
    except ValueError:
        raise MetadataError(f"{where}: {key} is {parameters[key]!r}, not a number") from None


def file_radiometry(href: str) -> Radiometry | None:
    """``(scale, offset, unit)`` of a Level-2 SR or ST band from its product's MTL, or None where there is none.

    Local folders, archives, ``gs://`` and ``http(s)://`` are read (:func:`pipelines.sidecars.read_sidecar`).

    Raises:
        MetadataError: the MTL exists but cannot be read, or does not give the band's factors.
    """
    path = href_path(href)
    found = _LEVEL_2.match(posixpath.basename(path))
    if found is None:
        return None
    folder = posixpath.dirname(path)
    read = parsed_sidecar((posixpath.join(folder, found.group("id") + suffix) for suffix in ("_MTL.json", "_MTL.txt")), mtl_groups)
    if read is None:
        return None
    mtl, groups = read
    band, kind = found.group("band").lstrip("0"), found.group("kind").upper()
    if kind == "SR":
        keys, unit = (f"REFLECTANCE_MULT_BAND_{band}", f"REFLECTANCE_ADD_BAND_{band}"), None
    else:
        keys, unit = (f"TEMPERATURE_MULT_BAND_ST_B{band}", f"TEMPERATURE_ADD_BAND_ST_B{band}"), "K"
    parameters, where = groups.get(_GROUPS[kind], {}), f"{mtl} {_GROUPS[kind]}"
    return _factor(parameters, keys[0], where), _factor(parameters, keys[1], where), unit
