"""The geozl codec family: a 2-D predictor, then OpenZL stages (specification section *Frames*)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final

import geozl
import numpy as np

from rumi_core.codecs._context import FORMAT_VERSION, ThreadLocalCache
from rumi_core.codecs._decoding import frame_format_version
from rumi_core.codecs._frames import PreparedFrame, prepare_frame, refuse_encoding
from rumi_core.codecs._nodata import nodata_cache_key, nodata_to_json, parse_nodata
from rumi_core.codecs._registry import FrameCodec, register_codec
from rumi_core.errors import InvalidInputError

if TYPE_CHECKING:
    import numpy.typing as npt

    from rumi_core.encodings import SampleEncoding

__all__ = ["GEOZL_ENCODINGS", "GeoZLGraph", "check_recipe"]

GEOZL_ENCODINGS: Final = frozenset(
    {"uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16", "float32", "float64"}
)
"""Encodings geozl has a dtype code for; the others are refused."""

_NEWER_FORMAT_STAGES: Final = frozenset({"sparse", "pivco"})
"""geozl stages that make libgeozl write OpenZL format 27, which rumi-eo cannot read."""

_RECIPE = re.compile(r"[a-z][a-z0-9_]*(?:>[a-z][a-z0-9_]*)+")

_GRAPHS: ThreadLocalCache[tuple[str, int, int, str, str], geozl.Graph] = ThreadLocalCache(32)
"""Built graphs per thread, keyed by recipe, frame geometry, dtype and nodata."""


def _graph(recipe: str, width: int, planes: int, dtype: np.dtype[Any], nodata: int | float | None = None) -> geozl.Graph:
    # A lossless graph depends only on these: geozl reads the raster it is
    # built from only for lossy domains and NaN nodata, so zeros stand in.
    def build() -> geozl.Graph:
        return geozl.graph(np.zeros((planes, 1, width), dtype), recipe, width=width, planes=planes, nodata=nodata)

    return _GRAPHS.get((recipe, width, planes, dtype.str, nodata_cache_key(nodata)), build)


@functools.cache
def _takes(recipe: str, encoding: SampleEncoding) -> bool:
    """Whether ``recipe`` compresses ``encoding``: a small probe, once per pair.

    Whether a recipe takes a sample width depends on the width alone.
    """
    probe = (np.arange(256, dtype=np.uint64) * 2654435761 % 1000).astype(encoding.dtype)
    try:
        geozl.compress(probe, graph=_graph(recipe, 16, 1, encoding.dtype))
    except (RuntimeError, ValueError):
        return False
    return True


def check_recipe(recipe: object) -> str:
    """Return ``recipe`` if it is a geozl recipe rumi-eo can read.

    Raises:
        InvalidInputError: ``recipe`` is not stages joined by ``>``, uses a
            stage that writes a newer OpenZL format than
            :data:`~rumi_core.codecs.FORMAT_VERSION`, or geozl knows it for no
            sample width.
    """
    if not isinstance(recipe, str) or not _RECIPE.fullmatch(recipe):
        raise InvalidInputError(
            f"a geozl recipe is stages joined by '>', such as 'planar>zigzag>transpose>entropy'; got {recipe!r}",
            field="codec.configuration.recipe",
        )
    newer = sorted(_NEWER_FORMAT_STAGES & set(recipe.split(">")))
    if newer:
        raise InvalidInputError(
            f"geozl stage {', '.join(map(repr, newer))} writes OpenZL format 27, above the "
            f"version {FORMAT_VERSION} rumi-eo reads; choose another final stage",
            field="codec.configuration.recipe",
        )
    errors = []
    for width in (2, 4, 8, 1):
        try:
            _graph(recipe, 8, 1, np.dtype(f"<u{width}"))
        except RuntimeError as err:
            errors.append(str(err))
        else:
            return recipe
    raise InvalidInputError(
        f"geozl does not know recipe {recipe!r} for any sample width: {errors[0]}",
        field="codec.configuration.recipe",
    )


@register_codec
@dataclass(frozen=True)
class GeoZLGraph(FrameCodec):
    """A geozl recipe: a 2-D predictor, then OpenZL stages, over the numeric stream.

    The predictor walks rows of ``width`` samples and restarts at each plane:
    ``width`` is ``w`` times the axes after it (interleaved bands or times sit
    inside a row), ``planes`` the product of the axes before ``h``. Readers
    need geozl's decoders. Specification sections *Frames* and *Choosing a
    frame unit*.

    Stages that need a newer OpenZL format (``sparse``, ``pivco``) are refused.
    Some stages take only some sample widths (``transpose`` needs at least 2
    bytes, ``entropy`` directly after ``zigzag`` at most 2): :meth:`accepts`
    tells, and :meth:`encode` refuses the others with :class:`InvalidInputError`.

    >>> GeoZLGraph("delta_w>zigzag>field_lz").to_dict()
    {'name': 'geozl', 'configuration': {'recipe': 'delta_w>zigzag>field_lz'}}
    """

    name: ClassVar[str] = "geozl"

    recipe: str = "planar>zigzag>transpose>entropy"
    """geozl method string, for example ``"med>zigzag>transpose>entropy"``."""
    nodata: int | float | None = None
    """A sentinel (or NaN) that geozl's nodata stage splits off into a mask
    before prediction, so the predictor sees a continuous surface; None for
    no nodata stage. Lossless either way. Omitted from the JSON form when None."""

    def __post_init__(self) -> None:
        check_recipe(self.recipe)
        object.__setattr__(self, "nodata", parse_nodata(self.nodata))

    def _configuration(self) -> dict[str, Any]:
        config: dict[str, Any] = {"recipe": self.recipe}
        if self.nodata is not None:
            config["nodata"] = nodata_to_json(self.nodata)
        return config

    def accepts(self, encoding: SampleEncoding) -> bool:
        """Return whether geozl has a dtype code for ``encoding`` and the recipe takes its width."""
        return encoding.name in GEOZL_ENCODINGS and _takes(self.recipe, encoding)

    def encode(self, samples: npt.NDArray[Any], *, axes: tuple[str, ...]) -> bytes:
        """Compress one frame; see :meth:`FrameCodec.encode`."""
        return self.encode_prepared(prepare_frame(samples, axes))

    def encode_prepared(self, frame: PreparedFrame) -> bytes:
        """Compress one frame already checked and measured by :func:`~rumi_core.codecs._frames.prepare_frame`.

        Raises:
            InvalidInputError: as :meth:`encode`.
        """
        if frame.encoding.name not in GEOZL_ENCODINGS:
            raise InvalidInputError(
                f"geozl has no codes for {frame.encoding.name} samples; it takes "
                f"{', '.join(sorted(GEOZL_ENCODINGS))}. Use the 'openzl' or 'raster' codec",
                field="samples",
            )
        if not self.accepts(frame.encoding):
            reason = "'transpose' needs at least 2 bytes and 'entropy' after a predictor at most 2"
            raise refuse_encoding(f"geozl recipe {self.recipe!r}", frame.encoding, reason, field="codec.configuration.recipe")
        try:
            graph = _graph(self.recipe, frame.width, frame.planes, frame.samples.dtype, self.nodata)
            out = geozl.compress(frame.samples, graph=graph)
        except (RuntimeError, ValueError, OverflowError) as err:
            raise InvalidInputError(
                f"geozl recipe {self.recipe!r} failed on {frame.encoding.name} samples of shape {frame.samples.shape}: {err}",
                field="samples",
            ) from err
        version = frame_format_version(out)
        if version > FORMAT_VERSION:
            raise InvalidInputError(
                f"geozl recipe {self.recipe!r} wrote OpenZL format {version}, above the version {FORMAT_VERSION} rumi-eo reads",
                field="codec.configuration.recipe",
            )
        return out
