"""Errors and warnings raised by rumi_core.

Every exception derives from :class:`RumiError`, which is a :class:`ValueError`,
so callers may catch either. A subclass exists for each failure a caller would
handle differently. Subclasses that correspond to a built-in category also
derive from it (``SourceError`` is an :class:`OSError`).

Exceptions that describe a broken file or blob carry structured context: the
rule that failed (a short quote of the specification's MUST), the field or tag
concerned and the byte offset where it was found. The message is built from
those fields, so ``str(err)`` always names the rule.
"""

from __future__ import annotations

__all__ = [
    "CRSError",
    "FrameDecodeError",
    "HeaderMismatchError",
    "InvalidFileError",
    "InvalidHeaderError",
    "InvalidInputError",
    "ResourceLimitError",
    "RumiError",
    "SelectionError",
    "SourceError",
]


class RumiError(ValueError):
    """Root of every error raised by rumi_core."""


class _LocatedError(RumiError):
    """An error that names a field, the rule it broke and where it was found."""

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        rule: str | None = None,
        offset: int | None = None,
    ) -> None:
        self.field = field
        """The tag, field or input the failure concerns, if any."""
        self.rule = rule
        """The specification rule that was broken, if any."""
        self.offset = offset
        """Byte offset in the file or blob where the failure was detected."""
        self.message = message
        """The message alone, without offset and rule: what a wrapper quotes."""
        parts = [message]
        if offset is not None:
            parts.append(f"at byte {offset}")
        text = " ".join(parts)
        if rule is not None:
            text = f"{text} (rule: {rule})"
        super().__init__(text)


class InvalidFileError(_LocatedError):
    """A ``.rumi`` file breaks a MUST of the specification."""


class InvalidHeaderError(_LocatedError):
    """A header blob breaks a MUST of the specification's Header blob section."""


class HeaderMismatchError(_LocatedError):
    """A header blob disagrees with the file it is said to describe."""


class InvalidInputError(_LocatedError):
    """A value given to the writer cannot be stored in a compliant file."""


class CRSError(InvalidInputError):
    """A coordinate reference system cannot be represented as an EPSG code."""


class ResourceLimitError(_LocatedError):
    """An operation would exceed a reader's resource limits.

    The file is not invalid; the reader refused to allocate or decode it.
    """


class FrameDecodeError(_LocatedError):
    """A frame failed to decode, or decoded to the wrong size."""


class SourceError(RumiError, OSError):
    """A byte-range source could not deliver the requested bytes."""

    status: int | None = None
    """What a remote store answered (an HTTP status), or None where nothing answered: a local file, no connection."""


class SelectionError(RumiError, IndexError):
    """A read asked for bands, times or a window outside the raster."""
