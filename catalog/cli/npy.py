"""``.npy`` outputs of ``rumi read``, written whole or not at all, for every sample encoding."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click
import numpy as np

from rumi_core.files import atomic_file

if TYPE_CHECKING:
    from pathlib import Path

    from numpy.typing import NDArray

__all__ = ["write_npy"]


def write_npy(output: Path, data: NDArray[Any]) -> None:
    """Save ``data`` as ``output``, through a temporary name, streamed (no second copy of the array in memory).

    .npy has no code for the ml_dtypes types (bfloat16, the float8 types):
    their exact bits are saved as opaque void items, and a note on stderr
    says how to view them again. NumPy saves most of them as void already,
    but float8_e5m2 as ``'<f1'``, which ``np.load`` then refuses.
    """
    raw = data.dtype.type.__module__.startswith("ml_dtypes")
    with atomic_file(output) as f:
        np.save(f, data.view(f"V{data.dtype.itemsize}") if raw else data, allow_pickle=False)
    if raw:
        click.echo(
            f"note: .npy stores {data.dtype} as raw {data.dtype.itemsize}-byte items; load with np.load(...).view(ml_dtypes.{data.dtype})",
            err=True,
        )
