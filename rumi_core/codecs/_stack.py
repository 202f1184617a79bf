"""The stack codec: a coding per plane of the frame, with exact prediction between planes.

Specification sections *Frames* and *Choosing a frame unit*: inter-band and
inter-date prediction stays inside one self-contained OpenZL frame, which
rumi-eo and geozl's decoders read. Automatic codec selection assembles it
from each plane's best chains.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from rumi_core.codecs._chain import Chain, chain_graph, terminal_graph
from rumi_core.codecs._context import CompressionContext, ThreadLocalCache, gl, zl
from rumi_core.codecs._frames import prepare_frame, refuse_encoding
from rumi_core.codecs._geozl import GEOZL_ENCODINGS, GeoZLGraph
from rumi_core.codecs._nodata import nodata_to_json, parse_nodata
from rumi_core.codecs._registry import FrameCodec, register_codec
from rumi_core.errors import InvalidInputError

if TYPE_CHECKING:
    import numpy.typing as npt

    from rumi_core.encodings import SampleEncoding

__all__ = ["PlaneCoding", "StackCodec"]


class _SplitGraph(zl.FunctionGraph):  # type: ignore[misc]  # openzl.ext is untyped (Any)
    """An OpenZL function graph: cut the stream into segments, each to its own graph.

    It runs only while compressing; the frame records the built-in split codec.
    """

    def __init__(self, sizes: list[int], successors: list[Any], order: list[int]) -> None:
        super().__init__()
        self._sizes = sizes
        self._successors = successors
        self._order = order

    def function_graph_description(self) -> Any:
        return zl.FunctionGraphDescription(name="rumi.split", input_type_masks=[zl.TypeMask.Numeric], custom_graphs=self._successors)

    def graph(self, state: Any) -> None:
        graphs = state.custom_graphs
        for edge, which in zip(zl.nodes.SplitNumeric(segment_sizes=self._sizes).run(state.edges[0]), self._order, strict=True):
            edge.set_destination(graphs[which])


@dataclass(frozen=True)
class PlaneCoding:
    """How one plane of a frame is compressed: one or more chains, and its reference.

    >>> PlaneCoding(("med>zigzag>transpose>entropy",), reference=True).to_dict()
    {'chains': ['med>zigzag>transpose>entropy'], 'reference': True}
    """

    chains: tuple[str, ...] = ("planar>zigzag>transpose>entropy",)
    """Chains (see :class:`Chain`). With several, OpenZL compresses the plane
    with each on every frame and keeps the smallest (its brute-force graph)."""
    reference: bool = False
    """Subtract the previous plane, sample by sample and exactly (wrapping
    integer arithmetic), before the chain runs: the inter-band or inter-date
    difference of *Choosing a frame unit*. The first plane has no previous one."""

    def __post_init__(self) -> None:
        chains = (self.chains,) if isinstance(self.chains, str) else tuple(self.chains)
        if not chains:
            raise InvalidInputError("a plane coding needs at least one chain", field="codec.configuration.planes.chains")
        canonical = tuple(str(Chain.parse(c)) for c in chains)
        if len(set(canonical)) != len(canonical):
            raise InvalidInputError(f"chains {list(canonical)} repeat a chain", field="codec.configuration.planes.chains")
        if not isinstance(self.reference, (bool, np.bool_)):
            raise InvalidInputError(f"reference is true or false, got {self.reference!r}", field="codec.configuration.planes.reference")
        object.__setattr__(self, "chains", canonical)
        object.__setattr__(self, "reference", bool(self.reference))

    @functools.cached_property
    def parsed(self) -> tuple[Chain, ...]:
        """The chains, parsed (once: every frame's encode asks, through :meth:`StackCodec.accepts`)."""
        return tuple(Chain.parse(c) for c in self.chains)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form ``{"chains": [...], "reference": bool}``."""
        return {"chains": list(self.chains), "reference": self.reference}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlaneCoding:
        """Read the JSON form written by :meth:`to_dict`.

        Raises:
            InvalidInputError: ``data`` is not a mapping of those two members.
        """
        if not isinstance(data, Mapping) or not set(data) <= {"chains", "reference"}:
            raise InvalidInputError(
                f"a plane coding is a mapping with 'chains' and 'reference', got {data!r}",
                field="codec.configuration.planes",
            )
        chains = data.get("chains", cls.chains)
        if isinstance(chains, str) or not isinstance(chains, (list, tuple)):
            raise InvalidInputError(f"'chains' is a list of chains, got {chains!r}", field="codec.configuration.planes.chains")
        return cls(tuple(chains), data.get("reference", False))


_CONTEXTS: ThreadLocalCache[tuple[str, int, int, int, int, str], CompressionContext] = ThreadLocalCache(32)
"""Compression contexts per thread, keyed by codec and frame geometry."""


@register_codec
@dataclass(frozen=True)
class StackCodec(FrameCodec):
    """A coding per plane of the frame, with exact prediction between planes.

    A frame's planes are the images stacked before ``h`` (one per band for
    ``b h w``, one per band and date for ``t b h w``; a tile is one plane);
    rows are ``w`` times the axes after ``w``. Each plane gets its own
    :class:`PlaneCoding`: a plane with ``reference`` first has the previous
    plane subtracted (geozl's ``delta_n`` with a row of one whole plane), then
    runs its chain, and gets its own entropy tables. With one coding, every
    plane uses it. The frame stays one self-contained OpenZL frame that rumi-eo
    and geozl's decoders read; a stack whose chains all start with ``id`` or
    ``delta_1d``, without references or nodata, needs no geozl decoder at all
    (:attr:`portable`). Specification sections *Frames* and *Choosing a frame unit*.

    ``nodata`` puts geozl's nodata stage in front (lossless, every NaN payload
    kept): holes go to a mask and are filled from their neighbours, which
    helps predictors across nodata edges.

    >>> from rumi_core.codecs import decode_frame
    >>> codec = StackCodec((PlaneCoding(("med>zigzag>transpose>entropy",)), PlaneCoding(("med>zigzag>entropy",), True)))
    >>> frame = codec.encode(np.arange(24, dtype="<u2").reshape(2, 3, 4), axes=("b", "h", "w"))
    >>> decode_frame(frame, decoded_frame_bytes=48).view("<u2").tolist() == list(range(24))
    True
    """

    name: ClassVar[str] = "stack"

    planes: tuple[PlaneCoding, ...] = (PlaneCoding(),)
    """One coding per plane, or a single coding for every plane."""
    nodata: int | float | None = None
    """Sentinel or NaN for geozl's nodata stage; None for none. Omitted from JSON when None."""

    def __post_init__(self) -> None:
        planes = tuple(self.planes)
        if not planes or not all(isinstance(p, PlaneCoding) for p in planes):
            raise InvalidInputError(
                f"'planes' is a non-empty list of plane codings, got {self.planes!r}", field="codec.configuration.planes"
            )
        if len(planes) > 1 and planes[0].reference:
            raise InvalidInputError("the first plane has no previous plane to reference", field="codec.configuration.planes.reference")
        object.__setattr__(self, "planes", planes)
        object.__setattr__(self, "nodata", parse_nodata(self.nodata))

    def _configuration(self) -> dict[str, Any]:
        config: dict[str, Any] = {"planes": [p.to_dict() for p in self.planes]}
        if self.nodata is not None:
            config["nodata"] = nodata_to_json(self.nodata)
        return config

    @classmethod
    def from_configuration(cls, configuration: Mapping[str, Any]) -> FrameCodec:
        """Build the codec from ``{"planes": [...], "nodata": ...}``.

        Raises:
            InvalidInputError: A member is unknown or has a bad value.
        """
        unknown = sorted(set(configuration) - {"planes", "nodata"})
        if unknown:
            raise InvalidInputError(
                f"codec 'stack' has no configuration member {', '.join(map(repr, unknown))}; it takes nodata, planes",
                field="codec.configuration",
            )
        planes = configuration.get("planes", [PlaneCoding().to_dict()])
        if isinstance(planes, (str, Mapping)) or not isinstance(planes, (list, tuple)):
            raise InvalidInputError(f"'planes' is a list of plane codings, got {planes!r}", field="codec.configuration.planes")
        return cls(tuple(PlaneCoding.from_dict(p) for p in planes), configuration.get("nodata"))

    @functools.cached_property
    def _key(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @property
    def portable(self) -> bool:
        """Whether any OpenZL decoder reads the frames, without geozl's decoders."""
        return self.nodata is None and all(not p.reference and all(c.portable for c in p.parsed) for p in self.planes)

    def accepts(self, encoding: SampleEncoding) -> bool:
        """Return whether every chain takes ``encoding``'s component width (and nodata its dtype)."""
        if self.nodata is not None and encoding.name not in GEOZL_ENCODINGS:
            return False
        width = encoding.component_bytes
        return all(c.accepts_width(width) for p in self.planes for c in p.parsed)

    def codings(self, planes: int) -> tuple[PlaneCoding, ...]:
        """Return the coding of each of ``planes`` planes.

        Raises:
            InvalidInputError: the codec names another number of planes.
        """
        if len(self.planes) == 1:
            return self.planes * planes
        if len(self.planes) != planes:
            raise InvalidInputError(
                f"stack codec has {len(self.planes)} plane codings, the frame has {planes} planes",
                field="codec.configuration.planes",
            )
        return self.planes

    def encode(self, samples: npt.NDArray[Any], *, axes: tuple[str, ...]) -> bytes:
        """Compress one frame; see :meth:`FrameCodec.encode`."""
        frame = prepare_frame(samples, axes)
        if not self.accepts(frame.encoding):
            reason = "'entropy' takes at most 2 bytes, 'transpose' at least 2, nodata only geozl's eleven dtypes"
            raise refuse_encoding(f"stack codec {self._key}", frame.encoding, reason, field="codec.configuration")
        if frame.planes == 1 and self._one_plane_geozl is not None and frame.encoding.name in GEOZL_ENCODINGS:
            return self._one_plane_geozl.encode_prepared(frame)
        rows = frame.samples.shape[axes.index("h")]
        row = frame.width * (frame.encoding.bytes_per_sample // frame.encoding.component_bytes)
        key = (self._key, frame.planes, rows, row, frame.encoding.component_bytes, frame.encoding.dtype.str)
        try:
            context = _CONTEXTS.get(key, lambda: self._build(frame.planes, rows, row, frame.encoding))
            return context.compress(frame.stream())
        except (RuntimeError, ValueError, OverflowError) as err:
            raise InvalidInputError(
                f"stack codec failed on {frame.encoding.name} samples of shape {frame.samples.shape}: {err}",
                field="samples",
            ) from err

    @functools.cached_property
    def _one_plane_geozl(self) -> GeoZLGraph | None:
        """The geozl codec that writes this stack's frames of one plane byte for byte, if there is one.

        A frame of one plane under one chain without a reference or nodata is
        one geozl graph: the same OpenZL graph, built by libgeozl instead of
        through ``openzl.ext`` (``tests/test_codecs.py`` checks the bytes are
        equal, for every such chain and dtype). ``geozl.compress`` releases the
        GIL, where ``openzl.ext``'s ``CCtx.compress`` holds it: 1,024 frames of
        64 x 64 uint16 under ``planar>zigzag>transpose>entropy`` took 82 ms
        through the CCtx on one thread and 88 ms on two, 62 ms through geozl
        on one and 48 ms on two (this project's 2-core machine). geozl's zstd
        back end runs at its own level, not
        :data:`~rumi_core.codecs._chain.ZSTD_LEVEL`, so chains that end in zstd
        stay with the CCtx.
        """
        if self.nodata is not None or len(self.planes) != 1:
            return None
        (coding,) = self.planes
        if coding.reference or len(coding.parsed) != 1:
            return None
        (chain,) = coding.parsed
        if chain.recipe is None or chain.terminal.endswith("zstd"):
            return None
        return GeoZLGraph(chain.recipe)

    def _build(self, planes: int, rows: int, row: int, encoding: SampleEncoding) -> CompressionContext:
        """Register the frame's graph on a new compressor and bind a context to it."""
        c = zl.Compressor()
        keep: list[Any] = []
        size = rows * row
        by_chains: dict[tuple[str, ...], Any] = {}

        def plane_graph(chains: tuple[str, ...]) -> Any:
            # Each plane is its own segment with its own entropy tables: on
            # Sentinel-2, Landsat-8 and a Landsat time series that beat
            # sharing one segment (and tables) between planes of equal coding.
            if chains not in by_chains:
                graphs = [chain_graph(c, Chain.parse(chain), row) for chain in chains]
                by_chains[chains] = graphs[0] if len(graphs) == 1 else zl.graphs.BruteForce(graphs)(c)
            return by_chains[chains]

        def split(sizes: list[int], successors: list[Any]) -> Any:
            if len(successors) == 1:
                return successors[0]
            unique = list({id(g): g for g in successors}.values())
            graph = _SplitGraph(sizes, unique, [unique.index(g) for g in successors])
            keep.append(graph)
            return c.register_function_graph(graph)

        def runs(chains: list[tuple[str, ...]]) -> Any:
            return split([size] * len(chains), [plane_graph(item) for item in chains])

        # Top level: plain planes, and groups that start at a plane and go on
        # through the planes that reference their previous one.
        items: list[tuple[bool, list[tuple[str, ...]]]] = []
        for index, coding in enumerate(self.codings(planes)):
            if coding.reference and index > 0:
                items[-1] = (True, [*items[-1][1], coding.chains])
            else:
                items.append((False, [coding.chains]))
        heads: list[Any] = []
        sizes: list[int] = []
        pending: list[tuple[str, ...]] = []
        for is_group, members in items:
            if not is_group:
                pending.extend(members)
                continue
            if pending:
                heads.append(runs(pending))
                sizes.append(size * len(pending))
                pending = []
            heads.append(gl.DeltaN(size)(c, runs(members)))
            sizes.append(size * len(members))
        if pending:
            heads.append(runs(pending))
            sizes.append(size * len(pending))
        start = split(sizes, heads)
        if self.nodata is not None:
            nan = isinstance(self.nodata, float) and math.isnan(self.nodata)
            mask = terminal_graph(c, "zstd")
            node = gl.Nodata(row, radius=0) if nan else gl.Nodata(row, value=self.nodata, dtype=encoding.dtype, radius=0)
            start = node(c, start, mask)
        c.select_starting_graph(start)
        return CompressionContext.build(c, tuple(keep))
