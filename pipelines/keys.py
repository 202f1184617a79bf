"""Frame keys: the ``(cube_id, frame_index)`` key of every frame element.

Style guide, *Beam transforms*: a key is an immutable, hashable value object
with a deterministic encoding and a registered coder. :class:`FrameKey` is
encoded by :class:`FrameKeyCoder` as the UTF-8 cube id, its length, and the
frame index, so equal keys give equal bytes on every runner and worker.

>>> FrameKeyCoder().decode(FrameKeyCoder().encode(FrameKey("cube", 7)))
FrameKey(cube_id='cube', index=7)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from apache_beam.coders import Coder
from apache_beam.coders.typecoders import registry

__all__ = ["FrameKey", "FrameKeyCoder"]

_LENGTH: Final = struct.Struct("<I")
_INDEX: Final = struct.Struct("<Q")


@dataclass(frozen=True, order=True)
class FrameKey:
    """One frame of one cube."""

    cube_id: str
    """The cube's output name (:func:`pipelines.plan.cube_name`)."""
    index: int
    """Frame index in the file (specification, *Frame index*)."""

    def __post_init__(self) -> None:
        if self.index < 0:
            from pipelines.errors import PipelineError

            raise PipelineError(f"a frame index is non-negative, got {self.index}")


class FrameKeyCoder(Coder):
    """Deterministic coder of :class:`FrameKey`: ``len(id) ‖ id ‖ index``, little-endian."""

    def encode(self, value: FrameKey) -> bytes:
        """Encode a key."""
        raw = value.cube_id.encode("utf-8")
        return _LENGTH.pack(len(raw)) + raw + _INDEX.pack(value.index)

    def decode(self, encoded: bytes) -> FrameKey:
        """Decode a key."""
        (n,) = _LENGTH.unpack_from(encoded)
        cube_id = encoded[_LENGTH.size : _LENGTH.size + n].decode("utf-8")
        (index,) = _INDEX.unpack_from(encoded, _LENGTH.size + n)
        return FrameKey(cube_id, index)

    def is_deterministic(self) -> bool:
        """Equal keys always encode to equal bytes."""
        return True

    def to_type_hint(self) -> type[FrameKey]:
        """The type this coder encodes."""
        return FrameKey


registry.register_coder(FrameKey, FrameKeyCoder)
