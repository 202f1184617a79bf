"""Errors of the conversion pipeline.

Every exception raised by :mod:`pipelines` derives from :class:`PipelineError`,
itself a :class:`rumi_core.RumiError` (and so a :class:`ValueError`), so a
caller can catch the pipeline's failures alone or every rumi failure at once.
Failures caused by one input file carry its ``href``
and a short machine-readable ``reason``, which is what the dead-letter output
records.
"""

from __future__ import annotations

from rumi_core.errors import RumiError

__all__ = ["AssemblyError", "OptionError", "PipelineError", "SceneError", "VerificationError"]


class PipelineError(RumiError):
    """Root of every error raised by the conversion pipeline."""


class OptionError(PipelineError):
    """A conversion option has a value the pipeline cannot use."""

    def __init__(self, message: str, *, option: str) -> None:
        super().__init__(f"{option}: {message}")
        self.option = option
        """The option, as spelled on the command line (``--cube-period``)."""


class SceneError(PipelineError):
    """One input scene cannot take part in a cube; it goes to the dead-letter output."""

    def __init__(self, message: str, *, href: str, reason: str) -> None:
        super().__init__(f"{href}: {message}")
        self.href = href
        """The input file or URL."""
        self.reason = reason
        """Short reason code, such as ``"missing-crs"`` or ``"unknown-time"``."""
        self.detail = message
        """The message without the href."""


class AssemblyError(PipelineError):
    """The compressed frames of a cube cannot be put together into a file."""


class VerificationError(PipelineError):
    """A finished file does not decode to its source pixels; it is not published."""
