"""Verifying an assembled file against its plan and its sources.

Before a file is published, its structure and header blob are validated
(:func:`rumi_core.validate`) and compared with the plan's layout,
georeferencing and trailer; then a deterministic sample of windows is read
back through the blob (:func:`rumi_core.read`) and compared byte for byte with
the source pixels (for a lossy cube: every sample within the bound). Both
the local and the bucket assembly (:mod:`pipelines.transforms.assemble_files`,
:mod:`pipelines.transforms.assemble_bucket`) run these checks.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from pipelines.errors import VerificationError
from pipelines.planning.codec_choice import selection_nodata
from pipelines.planning.plan import sample_indices
from pipelines.transforms.frames import LazyCube
from rumi_core.codecs import within_bound
from rumi_core.errors import RumiError
from rumi_core.reader import read
from rumi_core.validate import validate

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from pipelines.options import ConvertOptions
    from pipelines.planning.plan import CubePlan
    from pipelines.rasters import RasterCache
    from rumi_core.sources import ByteSource

__all__ = ["check_against_plan", "published_paths", "verify_file"]


def published_paths(options: ConvertOptions, plan: CubePlan) -> tuple[str, str]:
    """Where a cube's file and header blob are published: ``OUT/<cube_id>.rumi`` and ``OUT/<cube_id>.rumih``."""
    return os.path.join(options.out, f"{plan.cube_id}.rumi"), os.path.join(options.out, f"{plan.cube_id}.rumih")


def check_against_plan(path: str | ByteSource, blob: bytes, plan: CubePlan) -> None:
    """Validate structure and blob, and compare layout, georeferencing and trailer with the plan."""
    structure = validate(path, blob, quick=True)
    expected = plan.write_plan
    if structure.head.layout != expected.layout:
        raise VerificationError(f"{path}: layout {structure.head.layout} differs from the plan's {expected.layout}")
    if structure.head.georef != expected.georef:
        raise VerificationError(f"{path}: georeferencing {structure.head.georef} differs from the plan's {expected.georef}")
    if structure.trailer != expected.trailer:
        raise VerificationError(f"{path}: band texts or times differ from the plan's")


def _matches(expected: NDArray[Any], decoded: NDArray[Any], plan: CubePlan) -> bool:
    """Whether decoded samples are the source's: bit for bit, or within a lossy cube's bound."""
    bound = plan.error_bound
    if bound is None or decoded.tobytes() == expected.tobytes():
        return decoded.tobytes() == expected.tobytes()
    return bool(within_bound(expected, decoded, bound, nodata=selection_nodata(plan)).all())


def verify_file(path: str | ByteSource, blob: bytes, plan: CubePlan, rasters: RasterCache, *, frames: int) -> None:
    """Check a file against its plan and compare a sample of its frames with the source pixels.

    ``path`` is a local path or any byte source (a composed object in a
    bucket is read with ranged requests). Each sampled frame's window is read back through the blob with
    :func:`rumi_core.read` (for its band and time, or every band and time of a
    cell) and compared byte for byte with the same window read from the sources
    (for a lossy cube: every sample within the bound, nodata and NaN exact).

    Raises:
        VerificationError: the file, its blob or a frame disagrees with the plan or the sources.
        SceneError: a source cannot be read.
    """
    try:
        check_against_plan(path, blob, plan)
    except RumiError as err:
        if isinstance(err, VerificationError):
            raise
        raise VerificationError(f"{path}: {err}") from err
    layout = plan.layout
    source = LazyCube(plan, rasters)
    for index in sample_indices(layout.frame_count, frames):
        row, col, band, t = layout.frame_location(index)
        y0, y1, x0, x1 = layout.tile_bounds(row, col)
        bands = None if band is None else [band]
        times = None if t is None else [t]
        decoded = read(path, blob, bands=bands, times=times, window=((y0, y1), (x0, x1)), threads=1)
        expected = source[slice(None) if t is None else t, slice(None) if band is None else band, y0:y1, x0:x1]
        if layout.time_count == 1 and t is None:
            expected = expected[0]
        if not _matches(np.ascontiguousarray(expected), decoded, plan):
            raise VerificationError(f"{path}: frame {index} (tile {row},{col}, band {band}, time {t}) does not decode to the source pixels")
