"""Arguments of the public API, checked where they are given and named when refused.

A wrong argument fails at the call with a :class:`~rumi_core.errors.RumiError`
that names it, rather than later: ``verify=None`` reached the decoder and was
reported as a corrupt frame, and ``Limits(max_frames="1e6")`` failed at the
next read with a comparison between ``int`` and ``str``.

>>> flag("verify", None)
Traceback (most recent call last):
...
rumi_core.errors.RumiError: verify is True or False, got None
>>> whole_number("max_frames", -1, least=0)
Traceback (most recent call last):
...
rumi_core.errors.RumiError: max_frames is a whole number of at least 0, got -1
"""

from __future__ import annotations

import operator
from typing import SupportsIndex

import numpy as np

from rumi_core.errors import RumiError

__all__ = ["flag", "whole_number"]


def flag(name: str, value: object) -> bool:
    """``value`` as a bool: True or False (NumPy's too), nothing else.

    Raises:
        RumiError: ``value`` is not a boolean (None, 0, "no").
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise RumiError(f"{name} is True or False, got {value!r}")


def whole_number(name: str, value: object, *, least: int) -> int:
    """``value`` as an int of at least ``least``: anything with ``__index__`` (a Python, NumPy or PyTorch integer), not a
    bool or a float.

    Raises:
        RumiError: ``value`` is not such a number.
    """
    if not isinstance(value, (bool, np.bool_)) and isinstance(value, SupportsIndex):
        try:
            number = operator.index(value)
        except TypeError:  # a PyTorch tensor of a float, say
            pass
        else:
            if number >= least:
                return number
    raise RumiError(f"{name} is a whole number of at least {least}, got {value!r}")
