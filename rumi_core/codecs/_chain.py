"""Chains: the grammar of one plane's predictors and back end, and their OpenZL graphs.

A chain extends geozl's recipes with predictors applied one after another; a
:class:`~rumi_core.codecs.StackCodec` gives each plane of a frame one or more
chains. Specification sections *Frames* and *Choosing a frame unit*.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from rumi_core.codecs._context import gl, zl
from rumi_core.errors import InvalidInputError

__all__ = ["ZSTD_LEVEL", "Chain", "chain_graph", "terminal_graph"]

_STACK_PREDICTORS: Final = ("planar", "med", "average", "delta_w", "delta_n", "wp_static")
"""geozl's 2-D predictors, usable one after another in a chain."""

_STACK_TERMINALS: Final = ("entropy", "field_lz", "zstd", "transpose>entropy", "transpose>zstd", "compress")
"""The OpenZL back ends a chain can end with."""

ZSTD_LEVEL: Final = 3
"""The zstd level of the ``zstd`` and ``transpose>zstd`` back ends.

OpenZL's default level spends twice the time for almost nothing here: on 64
Sentinel-2-like 512² uint16 tiles under ``average>zigzag>transpose>zstd``,
3.54 ms per frame and 2.1211:1 at the default, 1.75 ms and 2.1176:1 at level 3
(0.17 % larger), 1.72 ms and 2.1122:1 at level 1 (measured on this project's
2-core machine, CPU time, openzl 0.3.0). zstd decodes at the same speed at
every level, so the decode-cost model is unchanged. The level is the
encoder's alone: a frame records nothing of it, and every reader decodes it.
"""

_FUSED_ZIGZAG: Final = {"planar": "PlanarZigzag", "med": "MedZigzag"}
"""Predictors geozl fuses with the zigzag that follows them (as its recipes do)."""

_PLAIN_PREDICTOR: Final = {
    "planar": "Planar",
    "med": "Med",
    "average": "Average",
    "delta_w": "DeltaW",
    "delta_n": "DeltaN",
    "wp_static": "WpStatic",
}

_CHAIN_STAGE = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class Chain:
    """A parsed chain: predictors, then zigzag, then an OpenZL back end.

    The grammar extends geozl's recipes with predictors applied one after
    another (``"planar>med>zigzag>transpose>entropy"`` predicts the residual
    of the planar predictor with MED)::

        chain      = head ">" terminal
        head       = "id" | "delta_1d" [">zigzag"] | predictor {">" predictor} ">zigzag"
        predictor  = planar | med | average | delta_w | delta_n | wp_static
        terminal   = entropy | field_lz | zstd | transpose>entropy | transpose>zstd | compress

    Every single-predictor chain is also a geozl recipe. ``id`` and
    ``delta_1d`` chains use OpenZL's built-in codecs only.

    >>> str(Chain.parse("planar>med>zigzag>transpose>entropy"))
    'planar>med>zigzag>transpose>entropy'
    >>> Chain.parse("id>field_lz").portable
    True
    """

    predictors: tuple[str, ...]
    """geozl 2-D predictors, applied in order."""
    delta_1d: bool
    """OpenZL's built-in delta over the flat stream instead of a 2-D predictor."""
    zigzag: bool
    """Fold signed residuals to unsigned before the back end."""
    terminal: str
    """The OpenZL back end, one of ``_STACK_TERMINALS``."""

    @classmethod
    def parse(cls, text: object) -> Chain:
        """Parse a chain; see the class docstring for the grammar.

        Raises:
            InvalidInputError: ``text`` does not follow the grammar.
        """
        if not isinstance(text, str) or not all(_CHAIN_STAGE.fullmatch(s) for s in text.split(">")):
            raise InvalidInputError(
                f"a chain is stages joined by '>', such as 'med>zigzag>transpose>entropy'; got {text!r}",
                field="codec.configuration.planes.chains",
            )
        stages = text.split(">")
        split = 2 if len(stages) >= 3 and stages[-2] == "transpose" else 1
        terminal, head = ">".join(stages[-split:]), stages[:-split]
        if terminal not in _STACK_TERMINALS or not head:
            raise InvalidInputError(
                f"chain {text!r} must end with one of {', '.join(_STACK_TERMINALS)} after a head such as 'id' or 'planar>zigzag'",
                field="codec.configuration.planes.chains",
            )
        if head == ["id"]:
            return cls((), False, False, terminal)
        if head[0] == "delta_1d" and head[1:] in ([], ["zigzag"]):
            return cls((), True, len(head) == 2, terminal)
        predictors = tuple(head[:-1])
        if head[-1] != "zigzag" or not predictors or not set(predictors) <= set(_STACK_PREDICTORS):
            raise InvalidInputError(
                f"chain {text!r}: predictors ({', '.join(_STACK_PREDICTORS)}) are followed by 'zigzag', or the head is 'id' or 'delta_1d'",
                field="codec.configuration.planes.chains",
            )
        return cls(predictors, False, True, terminal)

    def __str__(self) -> str:
        if self.predictors:
            head = [*self.predictors, "zigzag"]
        elif self.delta_1d:
            head = ["delta_1d", "zigzag"] if self.zigzag else ["delta_1d"]
        else:
            head = ["id"]
        return ">".join([*head, self.terminal])

    @property
    def portable(self) -> bool:
        """Whether the chain uses OpenZL's built-in codecs only (no geozl decoder needed)."""
        return not self.predictors

    @property
    def recipe(self) -> str | None:
        """The equivalent geozl recipe, or None when geozl's grammar cannot spell it."""
        if len(self.predictors) > 1 or self.terminal == "compress" or (self.delta_1d and self.zigzag):
            return None
        return str(self)

    def accepts_width(self, width: int) -> bool:
        """Whether the back end takes numeric elements of ``width`` bytes."""
        if self.terminal == "entropy":
            return width <= 2
        if self.terminal.startswith("transpose>"):
            return width >= 2
        return True


def terminal_graph(c: Any, terminal: str) -> Any:
    """Register the back end ``terminal`` (see :class:`Chain`) on compressor ``c``; return its GraphID."""
    if terminal == "entropy":
        return zl.graphs.Entropy()(c)
    if terminal == "field_lz":
        return zl.graphs.FieldLz()(c)
    if terminal == "compress":
        return zl.graphs.Compress()(c)
    back = zl.graphs.Zstd(compression_level=ZSTD_LEVEL)(c) if terminal.endswith("zstd") else zl.graphs.Entropy()(c)
    if terminal == "zstd":
        return zl.nodes.ConvertNumToSerialLE()(c, back)
    return zl.nodes.ConvertNumToStructLE()(c, zl.nodes.TransposeSplit()(c, back))


def chain_graph(c: Any, chain: Chain, row: int) -> Any:
    """Register ``chain`` on compressor ``c`` for one plane of rows of ``row`` elements; return its GraphID.

    A stack codec cuts its frame into one segment per plane, so every
    predictor here sees a single plane (a plane count of 1).
    """
    graph = terminal_graph(c, chain.terminal)
    predictors = list(chain.predictors)
    if chain.zigzag:
        last = predictors[-1] if predictors else None
        if last in _FUSED_ZIGZAG:
            graph = getattr(gl, _FUSED_ZIGZAG[last])(row, 1)(c, graph)
            predictors.pop()
        else:
            graph = zl.nodes.Zigzag()(c, graph)
    for name in reversed(predictors):
        node = getattr(gl, _PLAIN_PREDICTOR[name])
        # delta_w reads only to its left, so it has no plane count to restart at.
        graph = (node(row) if name == "delta_w" else node(row, 1))(c, graph)
    if chain.delta_1d:
        graph = zl.nodes.DeltaInt()(c, graph)
    return graph
