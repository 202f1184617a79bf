"""Choosing how a dataset's frames are compressed: the codec and the frame unit.

Specification sections *Frames* and *Choosing a frame unit*: every frame is a
self-contained OpenZL frame whose graph the writer is free to choose, and
"compression SHOULD be measured when more than one unit fits the access
pattern". This package measures. It is pure computation on sample frames: no
files, no Beam.

How a choice is made (``mode="auto"``):

1. **Sample** (:mod:`~rumi_core.compression.sampling`). Up to
   :data:`SAMPLE_LOCATIONS` tile locations, evenly spread over the grid (whole
   tiles before clipped edge tiles), holding a thirty-second of the dataset
   (:func:`sample_budget`, at least :data:`SAMPLE_MIN` and at most
   :data:`SAMPLE_BUDGET` samples); locations are dropped, then crops made
   around tile centres (never below 128 x 128) to fit. The same data always
   gives the same sample.
2. **Screen** (:mod:`~rumi_core.compression.screening`). The planes of the
   sampled frames are compressed with each geozl predictor, on the plane, its
   difference from the previous plane and its planar residual, then the best
   two options try every back end. Sizes are exact frame sizes from geozl.
3. **Assemble** (:mod:`~rumi_core.compression.lossless`,
   :mod:`~rumi_core.compression.bounded`). A per-plane
   :class:`~rumi_core.codecs.StackCodec`, the best single coding as a stack
   and as a geozl recipe, OpenZL's ``compress`` graph, and the nodata-stage
   stack when the sample holds ``nodata``; or, under an
   :class:`~rumi_core.codecs.ErrorBound`, geozl's quantized recipes.
4. **Measure** (:mod:`~rumi_core.compression.candidates`). Each candidate
   compresses the whole sample for real; its decode speed is *predicted* by
   the static cost model of :mod:`~rumi_core.compression.decode_cost`
   (fitted once by ``benchmarks/decode_cost.py``). The smallest candidate
   predicted to decode at ``decode_floor`` (with 10 % headroom) wins.

Every decision above is a pure function of the sample, the options and the
library versions (:func:`library_versions`): nothing reads a clock, depends
on thread scheduling or on the machine, so the same call writes the same
bytes anywhere, under any load.

With ``frame_unit="auto"`` (:func:`select_layout`) this runs for every unit
that fits the access preference: tile units (0; 9 compresses identically),
the cell units that stack bands or dates as planes, and a quick probe of the
interleaved ones. Units are compared by stored bytes per raw byte, every one
on the same sampled planes.

``mode="max"`` keeps the best three chains of each plane and lets OpenZL pick
among them on every frame. ``mode="portable"`` admits only OpenZL's built-in
codecs (no geozl decoder needed).

>>> import numpy as np
>>> y, x = np.mgrid[0:64, 0:64]
>>> frames = [(1000 + 3 * y + x + b * 7).astype("<u2")[np.newaxis].repeat(3, 0) for b in range(2)]
>>> codec = profile_codecs(frames, axes=("b", "h", "w"), decode_floor=0).codec
>>> codec.name
'stack'
"""

from rumi_core.compression.candidates import DECODE_FLOOR as DECODE_FLOOR
from rumi_core.compression.candidates import MODES as MODES
from rumi_core.compression.candidates import Candidate as Candidate
from rumi_core.compression.candidates import CodecMeasurements as CodecMeasurements
from rumi_core.compression.candidates import CompressionChoice as CompressionChoice
from rumi_core.compression.candidates import Mode as Mode
from rumi_core.compression.candidates import library_versions as library_versions
from rumi_core.compression.candidates import parse_mode as parse_mode
from rumi_core.compression.sampling import SAMPLE_BUDGET as SAMPLE_BUDGET
from rumi_core.compression.sampling import SAMPLE_LOCATIONS as SAMPLE_LOCATIONS
from rumi_core.compression.sampling import SAMPLE_MIN as SAMPLE_MIN
from rumi_core.compression.sampling import sample_budget as sample_budget
from rumi_core.compression.sampling import sample_locations as sample_locations
from rumi_core.compression.select import parse_frame_unit_choice as parse_frame_unit_choice
from rumi_core.compression.select import profile_codecs as profile_codecs
from rumi_core.compression.select import select_layout as select_layout

__all__ = [
    "DECODE_FLOOR",
    "MODES",
    "SAMPLE_BUDGET",
    "SAMPLE_LOCATIONS",
    "SAMPLE_MIN",
    "Candidate",
    "Mode",
    "CodecMeasurements",
    "CompressionChoice",
    "library_versions",
    "parse_frame_unit_choice",
    "parse_mode",
    "profile_codecs",
    "sample_budget",
    "sample_locations",
    "select_layout",
]
