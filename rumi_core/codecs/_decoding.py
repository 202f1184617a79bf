"""Decoding one frame, with its declared size checked before any allocation.

Specification sections *Frames* and *Resource limits*: a frame carries its own
graph, so any frame written by any rumi codec (or by rumi-eo) decodes here
without codec configuration; its declared output size is read from the frame
header and checked before anything is allocated or decoded.
"""

from __future__ import annotations

import re
import struct
import threading
from typing import TYPE_CHECKING, Any, Final

import geozl
import numpy as np

from rumi_core.codecs._context import zl
from rumi_core.errors import FrameDecodeError, InvalidInputError

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy.typing as npt

__all__ = ["decode_frame", "decode_into_place", "frame_format_version"]

_FRAME_MAGIC_BASE: Final = 0xD7B1A5C0
"""An OpenZL frame starts with this little-endian word plus its format version."""

_SIZE_RULE: Final = "decoded_frame_bytes = decoded_samples * bytes_per_sample"
"""The definition (*Sample encodings*) a frame that declares or yields another size breaks."""

_FRAME_RULE: Final = "Each frame is a self-contained OpenZL frame"
"""The rule (*File profile*) a frame that does not decode breaks."""


def frame_format_version(frame: bytes) -> int:
    """Return the OpenZL wire format version an OpenZL frame was written at."""
    (magic,) = struct.unpack_from("<I", frame)
    return int(magic) - _FRAME_MAGIC_BASE


# Decoding goes through geozl.decompress, which runs the OpenZL inside libgeozl
# from C with geozl's decoders built in, and releases the GIL. The alternative,
# one openzl.ext.DCtx per thread with geozl.register_decoders, reads the same
# frames but holds the GIL in DCtx.decompress and runs geozl's decoders as
# Python callbacks. Measured on 68 uint16 512x512 S2/L8 tiles, 2-core machine,
# checksums verified, MB/s of decoded samples (DCtx 1 thread / 2 threads,
# geozl.decompress 1 thread / 2 threads):
#   openzl compress                        1012 /  627   1015 / 1245
#   geozl planar>zigzag>transpose>entropy   997 /  615   1020 / 1323
#   geozl med>zigzag>transpose>entropy      587 /  618    598 /  869
#   geozl planar>zigzag>pfor               3020 / 2078   3488 / 2720
# Single-threaded they tie (per call 7.5 us vs 9.3 us on an 8x8 frame); with
# two threads the DCtx loses ground while geozl.decompress gains 25-45 %.
# Encoding is the same story: geozl.compress gives 485 MB/s on one thread and
# 956 MB/s on two, while openzl.ext CCtx holds the GIL.


def _declared_size(data: bytes) -> int:
    """Read the frame header's declared output size (*Resource limits*).

    Raises:
        FrameDecodeError: The header is unreadable or declares other than one output.
    """
    try:
        info = zl.FrameInfo(data)
        outputs = int(info.num_outputs)
        if outputs != 1:
            raise FrameDecodeError(
                f"a rumi frame decodes to exactly one stream, this one declares {outputs}",
                field="frame",
            )
        return int(info.output_content_size(0))
    except FrameDecodeError:
        raise
    except Exception as err:
        raise FrameDecodeError(f"not a readable OpenZL frame header: {err}", field="frame") from err


def _decoder_into() -> Any:
    """libgeozl's C decoder that writes into a caller's buffer, or None where geozl no longer has it.

    ``geozl.decompress`` is a thin wrapper around this function
    (``geozl_2d_decompress_c``) that always allocates a fresh output array;
    geozl has no public way to decode into an existing buffer. Calling the
    function through geozl's own cffi binding (pinned: geozl 0.19) decodes a
    frame straight into its place in a read's output, saving one allocation
    and one copy of every frame: 0.19 to 0.24 ms per 4-frame 512 x 512 read
    (CPU, about 5 %) on this project's 2-core machine. cffi releases the GIL
    around the call, as ``geozl.decompress`` does.
    """
    try:
        from geozl import _ffi

        load: Any = _ffi._load_lib_full
        return _ffi.ffi, load().geozl_2d_decompress_c
    except (ImportError, AttributeError, OSError):  # pragma: no cover - another geozl than the pinned one
        return None


_DECODE_INTO: Final = _decoder_into()
"""``(ffi, geozl_2d_decompress_c)``, or None: then :func:`decode_frame` copies ``geozl.decompress``'s output."""

_ERROR_TEXT: Final = 256
"""Bytes of libgeozl's error text kept for a message."""


_CALL_BUFFERS = threading.local()
"""Each thread's ``size_t`` for the bytes written and its error text buffer, reused from one decode to the next."""


def openzl_reason(text: str) -> str:
    """The cause an OpenZL error text names, on one line, without the library's own check, source path and stack.

    OpenZL writes ``Code: <cause> Message: <the check that failed> ... Stack
    Trace: #0 <function> (<source path>)``: the cause is what a user can act on.

    >>> openzl_reason("Code: Corruption detected Message: Check 'x' failed\\n Stack Trace: #0 f (a.c)")
    'Corruption detected'
    """
    flat = " ".join(text.split())
    found = _OPENZL_CAUSE.match(flat)
    return found.group(1) if found else flat.split(" Stack")[0]


_OPENZL_CAUSE: Final = re.compile(r"Code: (.+?) Message:")


def _decode_into(data: bytes, out: npt.NDArray[np.uint8], verify: bool) -> int:
    """Decode ``data`` into ``out`` with libgeozl; return the bytes written."""
    if _DECODE_INTO is None:
        decoded = geozl.decompress(data, verify=verify, max_output_size=out.size)
        out[: decoded.size] = decoded
        return int(decoded.size)
    ffi, decompress = _DECODE_INTO
    buffers = getattr(_CALL_BUFFERS, "buffers", None)
    if buffers is None:
        buffers = _CALL_BUFFERS.buffers = (ffi.new("size_t*"), ffi.new("char[]", _ERROR_TEXT))
    written, reason = buffers
    reason[0] = b"\0"  # no earlier decode's error text in this one's message
    code = decompress(ffi.from_buffer(data), len(data), ffi.from_buffer(out), out.size, written, int(verify), reason, _ERROR_TEXT)
    if code != 0:
        raise RuntimeError(f"{openzl_reason(ffi.string(reason).decode('utf-8', 'replace'))} (OpenZL error code {code})")
    return int(written[0])


def decode_frame(
    frame: bytes | bytearray | memoryview,
    *,
    decoded_frame_bytes: int,
    verify: bool = True,
    out: npt.NDArray[Any] | Callable[[], npt.NDArray[Any] | None] | None = None,
) -> npt.NDArray[np.uint8]:
    """Decode one frame to its samples' bytes.

    The frame's declared output size is read first and must equal
    ``decoded_frame_bytes`` (*Sample encodings*), so a frame is refused
    before any allocation or decoding (*Resource limits*).

    Args:
        frame: One OpenZL frame, as stored in the file.
        decoded_frame_bytes: The size the frame must decode to.
        verify: Check the frame's compressed and content checksums. ``False``
            skips the checks, for callers that verify the file another way.
        out: Where to decode: a writable C-contiguous array of exactly
            ``decoded_frame_bytes`` bytes whose first byte is 8-byte aligned (what
            OpenZL's numeric streams need), such as one band of a read's
            output; or a callable returning such an array or None, called
            only once the frame has declared ``decoded_frame_bytes``, so that a
            caller allocates nothing for a frame that contradicts the size it
            expects. None allocates a new array.

    Returns:
        A flat, writable, 8-byte aligned ``uint8`` array of exactly
        ``decoded_frame_bytes`` bytes (a view of ``out`` when given); view it as
        the sample dtype. If decoding into ``out`` fails, ``out`` holds
        unspecified bytes.

    Raises:
        FrameDecodeError: The frame is corrupt, fails a checksum, or declares
            or produces another size than ``decoded_frame_bytes``.
        InvalidInputError: ``decoded_frame_bytes`` is not a non-negative integer,
            or ``out`` is not such an array.
    """
    if isinstance(decoded_frame_bytes, bool) or not isinstance(decoded_frame_bytes, (int, np.integer)) or decoded_frame_bytes < 0:
        raise InvalidInputError(
            f"decoded_frame_bytes must be a non-negative integer, got {decoded_frame_bytes!r}",
            field="decoded_frame_bytes",
        )
    expected = int(decoded_frame_bytes)
    data = frame if isinstance(frame, bytes) else bytes(frame)
    return decode_into_place(data, expected, lambda: _target(out() if callable(out) else out, expected), verify=bool(verify))


def decode_into_place(
    frame: bytes, decoded_frame_bytes: int, place: Callable[[], npt.NDArray[np.uint8] | None] | None, *, verify: bool
) -> npt.NDArray[np.uint8]:
    """:func:`decode_frame` for a caller that has checked its own arguments: a reader's inner loop.

    ``decoded_frame_bytes`` is a non-negative ``int``, and ``place()`` returns a
    flat, writable, 8-byte aligned ``uint8`` array of exactly that many bytes,
    or None for a new one; it is called only once the frame has declared
    ``decoded_frame_bytes``. A ``place`` of None decodes to a new array. Nothing
    else is checked of them. A read calls this once per frame, right after a
    decode has evicted the CPU's caches: there, :func:`decode_frame`'s checks
    of its arguments took 12-15 us a frame, and a one-tile window read (four
    512 x 512 frames on two threads) took 2.24 ms without them against 2.29 ms.

    Raises:
        FrameDecodeError: as :func:`decode_frame`.
    """
    declared = _declared_size(frame)
    if declared != decoded_frame_bytes:
        raise FrameDecodeError(
            f"frame declares {declared} decoded bytes, expected {decoded_frame_bytes}",
            field="frame",
            rule=_SIZE_RULE,
        )
    target = None if place is None else place()
    if decoded_frame_bytes == 0:
        return np.zeros(0, np.uint8) if target is None else target
    if target is None:
        target = np.empty((decoded_frame_bytes + 7) // 8, np.uint64).view(np.uint8)[:decoded_frame_bytes]
    try:
        written = _decode_into(frame, target, verify)
    except Exception as err:
        raise FrameDecodeError(f"frame failed to decode: {openzl_reason(str(err))}", field="frame", rule=_FRAME_RULE) from err
    if written != decoded_frame_bytes:
        raise FrameDecodeError(
            f"frame decoded to {written} bytes, expected {decoded_frame_bytes}",
            field="frame",
            rule=_SIZE_RULE,
        )
    return target


def _target(out: npt.NDArray[Any] | None, expected: int) -> npt.NDArray[np.uint8] | None:
    """``out`` as flat bytes, checked to be a place a frame of ``expected`` bytes can be decoded into."""
    if out is None:
        return None
    flags = out.flags if isinstance(out, np.ndarray) else None
    if flags is None or not (flags.c_contiguous and flags.writeable) or out.nbytes != expected:
        raise InvalidInputError(
            f"out must be a writable C-contiguous array of {expected} bytes, got {type(out).__name__}"
            + (f" of {out.nbytes} bytes" if isinstance(out, np.ndarray) else ""),
            field="out",
        )
    if out.__array_interface__["data"][0] % 8:  # not out.ctypes.data, which runs Python code of NumPy's
        raise InvalidInputError("out must start at an 8-byte aligned address (OpenZL writes numeric streams there)", field="out")
    return out.reshape(-1).view(np.uint8)
