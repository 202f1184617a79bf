"""The checks and geometry every codec needs before it compresses a frame.

Specification sections *Frames* and *Sample encodings*: a frame holds its
samples in the decoded layout with ``h w`` adjacent, and every codec
compresses it as one OpenZL numeric stream whose element width is the width
of one sample component (the decoded bytes for real types, half of them for
complex types).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from rumi_core.encodings import encoding_for_dtype
from rumi_core.errors import InvalidInputError

if TYPE_CHECKING:
    import numpy.typing as npt

    from rumi_core.encodings import SampleEncoding

__all__ = ["UINT_BY_WIDTH", "PreparedFrame", "prepare_frame", "refuse_encoding"]

UINT_BY_WIDTH: Final[dict[int, np.dtype[Any]]] = {
    1: np.dtype("<u1"),
    2: np.dtype("<u2"),
    4: np.dtype("<u4"),
    8: np.dtype("<u8"),
}
"""The little-endian unsigned integer of each sample or component width, for bit-level views."""

_SPATIAL_RULE: Final = "Within a decoded frame, `h w` MUST stay together and in that order"


@dataclass(frozen=True)
class PreparedFrame:
    """Samples ready for compression, with the geometry of their layout."""

    samples: npt.NDArray[Any]
    encoding: SampleEncoding
    width: int
    """Samples in one row: ``w`` times every axis after it."""
    planes: int
    """Independent images stacked before ``h``: the product of the axes before it."""

    def stream(self) -> npt.NDArray[Any]:
        """Return the samples as unsigned integers of the component width.

        The result is a view of :attr:`samples`; keep it referenced until the
        compressor returns, since ``openzl.ext.Input`` does not hold it.
        """
        return self.samples.reshape(-1).view(UINT_BY_WIDTH[self.encoding.component_bytes])


def prepare_frame(samples: npt.NDArray[Any], axes: tuple[str, ...]) -> PreparedFrame:
    """Check a frame against *Frames* and *Sample encodings* and derive its geometry.

    Raises:
        InvalidInputError: ``samples`` is not an array of a sample encoding,
            is empty or holds a boolean byte other than 0 and 1, or ``axes``
            are not distinct names among ``b t h w`` with ``h w`` adjacent.
    """
    if not isinstance(samples, np.ndarray):
        raise InvalidInputError(
            f"samples must be a numpy.ndarray, got {type(samples).__name__}",
            field="samples",
        )
    encoding = encoding_for_dtype(samples.dtype)
    axes = tuple(axes)
    if len(axes) != samples.ndim:
        raise InvalidInputError(
            f"axes {axes} name {len(axes)} axes but samples have shape {samples.shape}",
            field="axes",
        )
    if len(set(axes)) != len(axes) or not set(axes) <= {"b", "t", "h", "w"}:
        raise InvalidInputError(
            f"axes {axes} must be distinct names among 'b', 't', 'h' and 'w'",
            field="axes",
        )
    if "h" not in axes or "w" not in axes or axes.index("w") != axes.index("h") + 1:
        raise InvalidInputError(
            f"axes {axes} must contain 'h' immediately followed by 'w'",
            field="axes",
            rule=_SPATIAL_RULE,
        )
    if samples.size == 0:
        raise InvalidInputError(
            f"a frame holds at least one sample, got shape {samples.shape}",
            field="samples",
        )
    # A byte-order change, never a cast: the encoding's dtype is the same type.
    arr = np.ascontiguousarray(samples, dtype=encoding.dtype)
    if encoding.name == "bool" and int(arr.view(np.uint8).max()) > 1:
        raise InvalidInputError(
            "boolean samples must be stored as bytes 0 or 1",
            field="samples",
            rule="Boolean samples occupy one decoded byte and every byte MUST be 0 or 1",
        )
    h = axes.index("h")
    planes = math.prod(samples.shape[:h])
    width = math.prod(samples.shape[h + 1 :])
    return PreparedFrame(arr, encoding, width, planes)


def refuse_encoding(codec: str, encoding: SampleEncoding, reason: str, *, field: str) -> InvalidInputError:
    """The error a codec raises for samples whose encoding its ``accepts`` refuses.

    One message shape for every codec: who refuses, the encoding and the
    width of its components (what the OpenZL numeric stream is made of), and why.

    Args:
        codec: The refusing codec and its configuration, e.g. ``"geozl recipe 'auto'"``.
        encoding: The encoding of the refused samples.
        reason: Which part of the configuration needs which widths.
        field: The configuration member to change.
    """
    return InvalidInputError(
        f"{codec} does not take {encoding.name} samples ({encoding.component_bytes}-byte components): {reason}",
        field=field,
    )
