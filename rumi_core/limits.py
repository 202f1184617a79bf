"""Resource limits a reader checks before it allocates, loops or decodes.

Specification section *Resource limits*: "A reader MUST check derived sizes
before allocating memory or decoding a frame [...] An operation that exceeds
the reader's resource limits MUST fail before the allocation or decode."

Every size that a file or header blob declares (``N``, ``T``, the band text
lengths, the coordinate count ``C``, the output of a read, the decoded size of
a frame) is compared with one field of :class:`Limits` before anything of that
size is built. A refused operation raises
:class:`~rumi_core.errors.ResourceLimitError`, whose message names the limit
and says how to raise it. The file is not invalid.

The defaults fit the machine: the output of one read may use a quarter of
the memory the process may use (physical memory, lowered by an address-space
``rlimit`` or a cgroup limit when one is set), and one decoded frame an eighth.
Limits decide whether an operation runs, never which bytes it produces, so
reading the machine here keeps output deterministic.

>>> small = Limits(max_output_bytes=1 << 20)
>>> try:
...     small.check("max_output_bytes", 2 << 20, "the read's output")
... except ResourceLimitError as err:
...     print(err.field, "|", str(err).split(";")[0])
max_output_bytes | the read's output is 2097152 bytes, above Limits.max_output_bytes = 1048576
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass, field

from rumi_core.arguments import whole_number
from rumi_core.errors import ResourceLimitError

__all__ = ["DEFAULT_LIMITS", "Limits", "usable_memory"]

_CGROUP_MEMORY_MAX = "/sys/fs/cgroup/memory.max"


def usable_memory() -> int:
    """Return the bytes of memory this process may use.

    The smallest of physical memory, the soft address-space ``rlimit`` and
    the cgroup v2 ``memory.max``, whichever of them are set.
    """
    candidates = [os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")]
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        candidates.append(soft)
    try:
        with open(_CGROUP_MEMORY_MAX, encoding="ascii") as f:
            text = f.read().strip()
        if text.isdigit():
            candidates.append(int(text))
    except OSError:
        pass
    return max(1, min(candidates))


def _share(fraction: int) -> int:
    return max(1 << 20, usable_memory() // fraction)


@dataclass(frozen=True)
class Limits:
    """The resource limits of one operation (read, validate, info, build_header).

    Every field is a ceiling in its own unit. Raise one by building a new
    value, e.g. ``Limits(max_output_bytes=64 << 30)``, and pass it as
    ``limits=`` to :func:`rumi_core.read`, :func:`rumi_core.validate`,
    :func:`rumi_core.info` or :meth:`rumi_core.HeaderBlob.from_bytes`.
    Each is a whole number of at least 0; no value means "no limit" (None is
    refused): give a large one, such as ``1 << 62``.

    Raises:
        RumiError: a field is not a whole number of at least 0.
    """

    max_output_bytes: int = field(default_factory=lambda: _share(4))
    """Largest output array of one read, in bytes (a quarter of usable memory)."""
    max_frame_bytes: int = field(default_factory=lambda: min(4 << 30, _share(8)))
    """Largest ``decoded_frame_bytes`` of a frame that is decoded (an eighth of usable memory, at most 4 GiB)."""
    max_frames: int = 1 << 26
    """Largest frame count ``N`` accepted from a file or header blob."""
    max_band_text_bytes: int = 1 << 20
    """Largest total ``S`` of a trailer's band texts, length prefixes included."""
    max_time_coordinates: int = 1 << 24
    """Largest coordinate count ``C`` that is held one value per coordinate.

    A regular axis (``time_bits = 0``) is held as arithmetic and is not
    bounded by this limit.
    """
    max_merged_request: int = 32 << 20
    """Adjacent frames are merged into one request up to this many bytes."""

    def __post_init__(self) -> None:
        # Checked here, not at the first read, where a limit of "1GB" or None failed comparing int and str.
        for name in self.__dataclass_fields__:
            object.__setattr__(self, name, whole_number(f"Limits.{name}", getattr(self, name), least=0))

    def check(self, name: str, value: int, what: str, *, offset: int | None = None) -> None:
        """Raise unless ``value`` is within the limit called ``name``.

        Raises:
            ResourceLimitError: ``value`` exceeds the limit; the message names it,
                and gives the value in bytes for a limit on bytes (``max_*_bytes``).
        """
        limit = getattr(self, name)
        if value > limit:
            unit = " bytes" if name.endswith("_bytes") else ""
            raise ResourceLimitError(
                f"{what} is {value}{unit}, above Limits.{name} = {limit}; "
                f"raise it with rumi_core.Limits({name}=...) if this machine can afford it",
                field=name,
                offset=offset,
            )


DEFAULT_LIMITS = Limits()
"""The limits used when an operation is given none, computed once at import."""
