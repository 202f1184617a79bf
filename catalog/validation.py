"""Validating STAC JSON offline, with stac-validator.

stac-validator fetches every JSON schema over the network. Here the network
may be absent, so :func:`validate_stac` hands it a schema map that points

* the STAC 1.1 core schemas and the GeoJSON schemas they use at the copies
  bundled with pystac;
* the ``rumi:`` extension schema at the copy bundled with this package;
* any other extension schema (projection, datacube, file, EO) at a local
  copy, when a directory of them is given (``schema_dir``, or the
  ``RUMI_STAC_SCHEMAS`` environment variable) laid out as
  ``<schema_dir>/<extension>/<version>/schema.json``;
* the PROJJSON schema those extensions refer to (v0.4 to v0.7) at the copy
  pyproj ships (``proj_data/projjson.schema.json``, v0.7, which extends the
  earlier versions).

An extension whose schema is neither local nor reachable is reported in
:attr:`ValidationReport.unchecked` instead of failing the validation, unless
``require_all=True``; the core schema and the ``rumi:`` schema are always
checked.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any, Protocol

from catalog.errors import CatalogError
from catalog.extension import SCHEMA_URI, SCHEMA_URI_V0_1, schema_path

__all__ = ["STACValidationError", "SupportsToDict", "ValidationReport", "core_schema_map", "validate_stac"]

_STAC_VERSION = "1.1.0"
_EXTENSION_URL = re.compile(r"^https://stac-extensions\.github\.io/([^/]+)/(v[^/]+)/schema\.json$")


class STACValidationError(CatalogError):
    """A STAC object does not validate against a schema it declares."""

    def __init__(self, message: str, *, schema: str, object_id: str | None) -> None:
        self.schema = schema
        """The schema that failed."""
        self.object_id = object_id
        """The id of the object."""
        super().__init__(f"{object_id or '<no id>'}: {message} (schema: {schema})")


@dataclass(frozen=True)
class ValidationReport:
    """What a validation checked."""

    checked: tuple[str, ...]
    """Schemas the object was validated against."""
    unchecked: tuple[str, ...] = field(default=())
    """Declared extension schemas that could not be loaded."""


class SupportsToDict(Protocol):
    """A STAC object as pystac models it (``Item``, ``Collection``, ``Catalog``): its JSON is ``to_dict()``."""

    def to_dict(self) -> dict[str, Any]: ...


def _document(obj: Mapping[str, Any] | SupportsToDict) -> dict[str, Any]:
    """The STAC JSON of ``obj``: a copy of a mapping, or what its ``to_dict()`` returns.

    Raises:
        TypeError: ``obj`` is neither, or its ``to_dict()`` returns no mapping.
    """
    if isinstance(obj, Mapping):
        return dict(obj)
    to_dict = getattr(obj, "to_dict", None)
    if not callable(to_dict):
        raise TypeError(f"validate_stac takes a STAC object as a dict or with to_dict() (a pystac Item), not {type(obj).__name__}")
    document = to_dict()
    if not isinstance(document, dict):
        raise TypeError(f"{type(obj).__name__}.to_dict() returned {type(document).__name__}, not a dict")
    return document


def core_schema_map() -> dict[str, str]:
    """Map the STAC 1.1 core and GeoJSON schema URLs to pystac's bundled copies."""
    root = files("pystac.validation").joinpath("jsonschemas")
    spec = root.joinpath("stac-spec", f"v{_STAC_VERSION}")
    base = f"https://schemas.stacspec.org/v{_STAC_VERSION}"
    out = {
        f"{base}/item-spec/json-schema/item.json": str(spec.joinpath("item.json")),
        f"{base}/catalog-spec/json-schema/catalog.json": str(spec.joinpath("catalog.json")),
        f"{base}/collection-spec/json-schema/collection.json": str(spec.joinpath("collection.json")),
        "https://geojson.org/schema/Feature.json": str(root.joinpath("geojson", "Feature.json")),
        "https://geojson.org/schema/Geometry.json": str(root.joinpath("geojson", "Geometry.json")),
    }
    for name in ("bands", "basics", "common", "data-values", "datetime", "instrument", "licensing", "provider"):
        out[f"{base}/item-spec/json-schema/{name}.json"] = str(spec.joinpath(f"{name}.json"))
    for uri in (SCHEMA_URI, SCHEMA_URI_V0_1):
        out[uri] = schema_path(uri)
    projjson = _projjson_schema()
    if projjson is not None:
        for minor in range(4, 8):
            out[f"https://proj.org/schemas/v0.{minor}/projjson.schema.json"] = projjson
    return out


def _projjson_schema() -> str | None:
    """pyproj's copy of the PROJJSON schema, or None when this pyproj ships none."""
    from pyproj.datadir import get_data_dir

    path = os.path.join(get_data_dir(), "projjson.schema.json")
    return path if os.path.isfile(path) else None


def _local_extension(url: str, schema_dir: str | None) -> str | None:
    if schema_dir is None:
        return None
    m = _EXTENSION_URL.match(url)
    if m is None:
        return None
    path = os.path.join(schema_dir, m.group(1), m.group(2), "schema.json")
    return path if os.path.isfile(path) else None


def validate_stac(
    obj: Mapping[str, Any] | SupportsToDict,
    *,
    schema_dir: str | None = None,
    require_all: bool = False,
) -> ValidationReport:
    """Validate an item, collection or catalog with stac-validator, offline where possible.

    Args:
        obj: The STAC object: its JSON as a dict, or a pystac ``Item``,
            ``Collection`` or ``Catalog`` (any object with ``to_dict()``), as
            :func:`catalog.create_item` returns it.
        schema_dir: Directory of local extension schemas; ``$RUMI_STAC_SCHEMAS`` when None.
        require_all: Fail when a declared extension schema cannot be loaded.

    Returns:
        Which schemas were checked and which could not be loaded.

    Raises:
        STACValidationError: the object breaks a schema, or (with
            ``require_all``) an extension schema cannot be loaded.
        TypeError: ``obj`` is neither a dict nor has ``to_dict()``.
    """
    from stac_validator.validate import StacValidate

    document = _document(obj)

    schema_dir = schema_dir if schema_dir is not None else os.environ.get("RUMI_STAC_SCHEMAS")
    schema_map = core_schema_map()
    object_id = document.get("id")
    core = StacValidate(core=True, schema_map=dict(schema_map))
    if not core.validate_dict(dict(document)):
        raise STACValidationError(_message(core.message), schema=f"STAC {_STAC_VERSION} core", object_id=object_id)
    checked = [f"STAC {_STAC_VERSION} core"]
    unchecked = []
    for url in document.get("stac_extensions", []):
        local = schema_map.get(url) or _local_extension(url, schema_dir)
        if local is None:
            if require_all:
                target = url
            else:
                unchecked.append(url)
                continue
        else:
            target = local
        ext = StacValidate(custom=target, schema_map=dict(schema_map))
        if not ext.validate_dict(dict(document)):
            message = _message(ext.message)
            if local is None and "JSONSchemaValidationError" not in message:
                raise STACValidationError(f"cannot load the schema: {message}", schema=url, object_id=object_id)
            raise STACValidationError(message, schema=url, object_id=object_id)
        checked.append(url)
    return ValidationReport(tuple(checked), tuple(unchecked))


def _message(messages: list[dict[str, Any]]) -> str:
    if not messages:
        return "invalid"
    last = messages[-1]
    return f"{last.get('error_type', 'error')}: {last.get('error_message', last)}"
