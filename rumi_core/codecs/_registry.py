"""The frame codec interface and the registry from codec names to classes.

Specification section *Frames*: every frame is a self-contained OpenZL frame
that carries its own graph and codec parameters, so a reader needs no codec
configuration to decode it. A :class:`FrameCodec` is therefore writer-side data
only: a frozen dataclass whose fields are its whole configuration, with a JSON
form ``{"name": ..., "configuration": {...}}`` and a registry from names to
classes, filled when :mod:`rumi_core.codecs` is imported.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from rumi_core.errors import InvalidInputError

if TYPE_CHECKING:
    import numpy.typing as npt

    from rumi_core.encodings import SampleEncoding

__all__ = ["FrameCodec", "codec_class", "codec_from_dict", "register_codec", "registered_codecs"]


class FrameCodec(abc.ABC):
    """Turns the samples of one frame into one OpenZL frame.

    Subclasses are frozen dataclasses whose fields are their whole
    configuration, registered under :attr:`name` with :func:`register_codec`.
    Specification section *Frames*.
    """

    name: ClassVar[str]
    """Registry name, the ``"name"`` member of the JSON form."""

    @abc.abstractmethod
    def encode(self, samples: npt.NDArray[Any], *, axes: tuple[str, ...]) -> bytes:
        """Compress one frame.

        Args:
            samples: The frame in its decoded layout, C-contiguous, with the
                dtype of one of the 21 sample encodings.
            axes: Name of each axis of ``samples`` in order, drawn from
                ``b``, ``t``, ``h`` and ``w``; ``h w`` adjacent and in that
                order, for example ``("t", "b", "h", "w")`` or ``("h", "w", "b")``.

        Returns:
            One OpenZL frame that decodes to ``samples.nbytes`` bytes.

        Raises:
            InvalidInputError: The samples, their axes or their dtype cannot
                be compressed by this codec.
        """

    def accepts(self, encoding: SampleEncoding) -> bool:
        """Return whether :meth:`encode` takes samples of ``encoding``."""
        del encoding
        return True

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form ``{"name": ..., "configuration": {...}}``."""
        return {"name": self.name, "configuration": self._configuration()}

    def _configuration(self) -> dict[str, Any]:
        if not dataclasses.is_dataclass(self):
            raise TypeError(f"{type(self).__name__} must be a dataclass")
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_configuration(cls, configuration: Mapping[str, Any]) -> FrameCodec:
        """Build the codec from the ``"configuration"`` member of its JSON form.

        Raises:
            InvalidInputError: A member is unknown or has a bad value.
        """
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls.__name__} must be a dataclass")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(configuration) - known)
        if unknown:
            raise InvalidInputError(
                f"codec {cls.name!r} has no configuration member {', '.join(map(repr, unknown))}; "
                f"it takes {', '.join(sorted(known)) or 'none'}",
                field="codec.configuration",
            )
        return cls(**configuration)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FrameCodec:
        """Build a codec from its JSON form, checking it is an instance of ``cls``.

        Raises:
            InvalidInputError: The name is unknown, the configuration is bad,
                or the codec is not a ``cls``.
        """
        codec = codec_from_dict(data)
        if not isinstance(codec, cls):
            raise InvalidInputError(
                f"expected a {cls.__name__} codec, got {codec.name!r}",
                field="codec.name",
            )
        return codec


_REGISTRY: dict[str, type[FrameCodec]] = {}


_C = TypeVar("_C", bound=type[FrameCodec])


def register_codec(cls: _C) -> _C:
    """Register a codec class under its ``name``; usable as a class decorator.

    Raises:
        InvalidInputError: Another class is already registered under that name.
    """
    existing = _REGISTRY.get(cls.name)
    if existing is not None and existing is not cls:
        raise InvalidInputError(
            f"codec name {cls.name!r} is already taken by {existing.__module__}.{existing.__qualname__}",
            field="codec.name",
        )
    _REGISTRY[cls.name] = cls
    return cls


def registered_codecs() -> tuple[str, ...]:
    """Return the registered codec names, sorted."""
    return tuple(sorted(_REGISTRY))


def codec_class(name: object) -> type[FrameCodec]:
    """Return the class registered under ``name``.

    Raises:
        InvalidInputError: No codec is registered under ``name``.
    """
    if isinstance(name, str) and name in _REGISTRY:
        return _REGISTRY[name]
    raise InvalidInputError(
        f"unknown codec name {name!r}; known codecs are {', '.join(registered_codecs())}",
        field="codec.name",
    )


def codec_from_dict(data: Mapping[str, Any]) -> FrameCodec:
    """Build a codec from its JSON form ``{"name": ..., "configuration": {...}}``.

    ``"configuration"`` may be omitted for a codec's default configuration.

    Raises:
        InvalidInputError: ``data`` is malformed, names an unregistered codec,
            or carries a configuration the codec refuses.
    """
    if not isinstance(data, Mapping):
        raise InvalidInputError(
            f"a codec is a mapping with 'name' and 'configuration', got {type(data).__name__}",
            field="codec",
        )
    extra = sorted(set(data) - {"name", "configuration"})
    if extra:
        raise InvalidInputError(
            f"a codec has only 'name' and 'configuration' members, got {', '.join(map(repr, extra))}",
            field="codec",
        )
    if "name" not in data:
        raise InvalidInputError("a codec needs a 'name' member", field="codec.name")
    cls = codec_class(data["name"])
    configuration = data.get("configuration", {})
    if not isinstance(configuration, Mapping):
        raise InvalidInputError(
            f"codec configuration must be a mapping, got {type(configuration).__name__}",
            field="codec.configuration",
        )
    return cls.from_configuration(configuration)
