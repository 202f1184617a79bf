"""The trailer: band descriptions and time coordinates after the frame data.

Specification section *Trailer*. Layout::

    magic "TAIL" (uint32 0x4C494154) | version (uint16, 1)
    band_texts[B]: uint16 length + UTF-8 bytes, in band order
    time fields (22 bytes) | time residuals, ceil(C * time_bits / 8) bytes

The trailer bytes depend on the band texts and times alone, so a worker can
produce them without seeing any frame (see :mod:`rumi_core.assemble`). A
reader never uses the trailer to locate or decode frames.

>>> t = Trailer(("B4, Red",), TimeCoordinates.from_values(["2020-01-01"]))
>>> Trailer.from_bytes(t.to_bytes(), samples_per_pixel=1, time_count=1) == t
True
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from rumi_core.bitpack import packed_size
from rumi_core.errors import InvalidFileError, InvalidInputError
from rumi_core.limits import DEFAULT_LIMITS, Limits
from rumi_core.time_coordinates import TIME_FIELDS, TRAILER_SIZE_RULE, TimeCoordinates, TimeFields
from rumi_core.times import INTERVAL

__all__ = [
    "TRAILER_MAGIC",
    "TRAILER_VERSION",
    "Trailer",
    "check_band_texts",
]

TRAILER_MAGIC = 0x4C494154
TRAILER_VERSION = 1
_HEAD = struct.Struct("<IH")
_LEN = struct.Struct("<H")


def check_band_texts(texts: list[bytes]) -> None:
    """Check the band text rules: UTF-8, 1..65535 bytes, no NUL, no duplicates.

    Raises:
        InvalidInputError: a rule is broken; the message names the band.
    """
    seen: dict[bytes, int] = {}
    for b, raw in enumerate(texts):
        if not raw:
            raise InvalidInputError(f"band {b} text is empty", field="band_texts", rule="each text MUST be at least one byte long")
        if len(raw) > 0xFFFF:
            raise InvalidInputError(f"band {b} text is {len(raw)} bytes, the maximum is 65535", field="band_texts")
        if b"\x00" in raw:
            raise InvalidInputError(
                f"band {b} text contains the byte 0x00", field="band_texts", rule="each text MUST be free of the byte 0x00"
            )
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InvalidInputError(f"band {b} text is not valid UTF-8", field="band_texts", rule="each text MUST be valid UTF-8") from err
        if raw in seen:
            raise InvalidInputError(
                f"band {b} text {raw.decode('utf-8')!r} repeats band {seen[raw]}",
                field="band_texts",
                rule="two texts in one file MUST NOT be equal",
            )
        seen[raw] = b


def _encode_texts(texts: tuple[str, ...]) -> list[bytes]:
    out = []
    for b, t in enumerate(texts):
        if not isinstance(t, str):
            raise InvalidInputError(f"band {b} text must be a str, got {type(t).__name__}", field="bands")
        try:
            out.append(t.encode("utf-8"))
        except UnicodeEncodeError as err:
            raise InvalidInputError(
                f"band {b} text cannot be encoded as UTF-8", field="bands", rule="each text MUST be valid UTF-8"
            ) from err
    check_band_texts(out)
    return out


@dataclass(frozen=True)
class Trailer:
    """Band descriptions and time coordinates of one file."""

    band_texts: tuple[str, ...]
    """One text per band, in band order."""
    times: TimeCoordinates
    """One coordinate (or interval) per time step."""
    _encoded_texts: list[bytes] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "band_texts", tuple(self.band_texts))
        object.__setattr__(self, "_encoded_texts", _encode_texts(self.band_texts))

    def to_bytes(self) -> bytes:
        """Return the canonical trailer bytes."""
        parts = [_HEAD.pack(TRAILER_MAGIC, TRAILER_VERSION)]
        for raw in self._encoded_texts:
            parts.append(_LEN.pack(len(raw)))
            parts.append(raw)
        fields, residuals = self.times.encode()
        parts.append(fields.to_bytes())
        parts.append(residuals)
        return b"".join(parts)

    @classmethod
    def from_bytes(
        cls,
        data: bytes | memoryview,
        *,
        samples_per_pixel: int,
        time_count: int,
        offset: int = 0,
        limits: Limits = DEFAULT_LIMITS,
    ) -> Trailer:
        """Parse and check a whole trailer (from its magic to the end of the file).

        ``offset`` is the trailer's position in the file, used in messages.

        Raises:
            InvalidFileError: any trailer MUST is broken.
            ResourceLimitError: the band texts or coordinate count exceed ``limits``.
        """
        data = memoryview(data)

        def fail(msg: str, at: int, rule: str = TRAILER_SIZE_RULE, fld: str = "trailer") -> InvalidFileError:
            return InvalidFileError(msg, field=fld, rule=rule, offset=offset + at)

        if len(data) < _HEAD.size:
            raise fail(f"the trailer is {len(data)} bytes, shorter than its 6-byte magic and version", 0)
        magic, version = _HEAD.unpack_from(data, 0)
        if magic != TRAILER_MAGIC:
            raise fail(
                f"trailer magic is {bytes(data[:4])!r}, expected b'TAIL'", 0, "A reader MUST reject any other value", "trailer magic"
            )
        if version != TRAILER_VERSION:
            raise fail(
                f"trailer version is {version}, expected 1",
                4,
                "A reader that implements version 1 MUST reject any other value",
                "trailer version",
            )
        pos = _HEAD.size
        texts: list[bytes] = []
        total = 0
        for b in range(samples_per_pixel):
            if pos + 2 > len(data):
                raise fail(f"the trailer ends inside the length of band text {b}", pos, fld="band_texts")
            (n,) = _LEN.unpack_from(data, pos)
            total += 2 + n
            # Invalid before too large: a length past the bytes there is a broken rule whatever the limits.
            if pos + 2 + n > len(data):
                raise fail(f"band text {b} of {n} bytes runs past the end of the file", pos, fld="band_texts")
            limits.check("max_band_text_bytes", total, f"band texts 0..{b}", offset=offset + pos)
            texts.append(bytes(data[pos + 2 : pos + 2 + n]))
            pos += 2 + n
        try:
            check_band_texts(texts)
        except InvalidInputError as err:
            raise fail(err.message, _HEAD.size, err.rule or "Band descriptions", "band_texts") from err
        if pos + TIME_FIELDS.size > len(data):
            raise fail("the trailer ends inside its time fields", pos, fld="time fields")
        tf = TimeFields.from_bytes(data[pos : pos + TIME_FIELDS.size])
        count = time_count * (2 if tf.time_type == INTERVAL else 1)
        expected = pos + TIME_FIELDS.size + packed_size(count, min(tf.time_bits, 64))
        if tf.time_type in (1, 2) and tf.time_bits <= 64 and len(data) != expected:
            raise fail(
                f"the trailer is {len(data)} bytes, expected exactly 28 + S + ceil(C * time_bits / 8) = {expected}",
                0,
                TRAILER_SIZE_RULE,
                "trailer size",
            )
        if tf.time_bits:
            # Checked once the size holds (that is arithmetic, and a file of the wrong size is invalid
            # whatever the limits). A regular axis (time_bits = 0) is held as arithmetic, whatever C is.
            limits.check("max_time_coordinates", count, "the time coordinate count C", offset=offset + pos)
        try:
            times, _ = TimeCoordinates.decode(tf, bytes(data[pos + TIME_FIELDS.size :]), time_count=time_count)
        except InvalidFileError as err:
            raise fail(err.message, pos, err.rule or "Time coordinates", err.field or "time fields") from err
        return cls(tuple(t.decode("utf-8") for t in texts), times)
