"""Grouping scenes into cubes: the pure planning algorithm of ``rumi convert``.

:func:`plan_cubes` turns the metadata
of every input scene into :class:`~pipelines.planning.plan.CubePlan` objects and
:class:`~pipelines.transforms.dead_letters.DeadLetter` records, in five steps:

1. **Stacking.** Single-band files of one acquisition (same
   :func:`~pipelines.planning.bands.stack_id`, time and raster) become the bands of one
   :class:`Acquisition`, ordered by band token. A file whose dtype or nodata
   differs from the rest of its stack is a *dtype mismatch*. Unnamed
   single-band files of one directory, time, raster and scene ID whose stems
   differ (Landsat Collection 2's ``QA_PIXEL`` and ``ST_TRAD``, or
   ``ndvi_20230612.tif`` and ``evi_20230612.tif``) are quantities of one
   scene, not duplicates: each band takes its stem's name, and those of one
   dtype and nodata stack together (:func:`name_quantities`). A file whose
   transform is not north-up is *rotated*: a dead letter, or with ``--align
   reproject`` warped onto the north-up grid of :func:`~pipelines.planning.lattice.north_up`.
2. **Series.** Acquisitions are grouped by CRS, pixel size, raster type, band
   set, dtype, nodata and ``--cube-period``. Where two series on one grid hold
   the same bands with another dtype, or nested band sets (one a strict
   subset of the other), the smaller is a *dtype* or *band-count mismatch*,
   unless the larger has an acquisition at each of its times: then it is
   another product of the same scenes (a granule's masks beside its bands).
3. **Alignment.** Within a series, the alignment (origin modulo pixel size)
   held by most acquisitions is the group grid. The others are *off grid*:
   dead letters, or with ``--align reproject`` warped onto the group grid.
4. **Extent.** With ``--extent separate`` each extent is its own cube; with
   ``union`` (and a nodata value to fill with) a series becomes one cube over
   the union of its extents.
5. **Time.** Acquisitions are sorted by time. Of two processings of one
   Sentinel-2 datatake at one instant, named by their products, the newest is
   kept and the older dropped. Any other two at one instant are an error
   unless ``--duplicates`` keeps the first or last (in the order of their
   files' paths, links resolved) or mosaics them (first valid pixel wins).

Every decision is deterministic: ties are broken by sorted paths and values,
never by arrival order. The module is pure but for resolving the links of
local paths (:func:`~pipelines.planning.hrefs.input_identity`): no reads, no Beam.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final, NamedTuple

from catalog.extension import VERTICAL_CRS
from catalog.grid import Grid
from pipelines.archives import archive_of, extracted_paths
from pipelines.planning.bands import band_token, directory, natural_key, stack_id, stem_id, stem_name, unique_band_texts
from pipelines.planning.codec_choice import choose_frame_unit
from pipelines.planning.hrefs import input_identity, one_href_per_file
from pipelines.planning.lattice import Extent, Lattice, OnGrid, is_north_up, north_up, snap_extent
from pipelines.planning.plan import CubeBand, CubePlan, Source, Warp, cube_name, inputs_version
from pipelines.planning.timestamps import period_label
from pipelines.sentinel2.products import newest_versions, product_of
from pipelines.transforms.dead_letters import DeadLetter
from rumi_core.errors import InvalidInputError
from rumi_core.times import format_seconds

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from pipelines.options import ConvertOptions
    from pipelines.planning.scene import Scene, SourceBand
    from pipelines.sentinel2.products import S2Product

__all__ = ["Acquisition", "CubeKey", "StackKey", "name_quantities", "plan_cubes", "smallest_tile_size", "stack_scenes"]

STAGE = "PlanCubes"

MIN_FRAME_SAMPLES = 256
"""A cube cut into frames of fewer samples than this (a 16 x 16 tile of one band and date) is refused.

Each frame brings about 60 bytes of its own (OpenZL's frame header, its
offset and byte count), whatever the cube's size. Measured on a 4-band 256 x
256 uint16 scene (``rumi_core.write``, codec ``raster``), the file was 2.25x the
raw pixels in 4-pixel tiles, 1.05x in 8-pixel tiles, 0.75x in 12 and 0.64x in
16 (0.51x in 64). The rule depends on the frame alone: a cube of many frames
(a year of 13 bands over a Sentinel-2 tile) in 256-pixel tiles is as compact
per frame as one date. A cube whose image fits in one tile is never refused:
its frames are as small as the image.
"""


def smallest_tile_size(height: int, width: int, samples_per_pixel: int) -> int:
    """The smallest ``--tile-size`` whose frames hold :data:`MIN_FRAME_SAMPLES` samples, or that makes the image one tile.

    ``samples_per_pixel`` is what one pixel of a frame holds: 1 for a frame
    of one band and date, more for frame units that group bands or dates. A
    thin image (3 rows, say) needs tiles far wider than a square one would.
    """
    size = 1
    while size < max(height, width) and min(size, height) * min(size, width) * samples_per_pixel < MIN_FRAME_SAMPLES:
        size += 1
    return size


@dataclass(frozen=True)
class Acquisition(OnGrid):
    """The bands of one raster at one time, possibly from several single-band files."""

    time: int
    """POSIX seconds."""
    grid: Grid
    """Grid of its files."""
    dtype: str
    """Shared dtype."""
    nodata: float | None
    """Shared nodata."""
    nodata_key: str
    """:func:`pipelines.planning.scene.nodata_key` of :attr:`nodata`."""
    bands: tuple[tuple[str, SourceBand], ...]
    """``(href, band)`` of every band, in cube band order."""
    names: tuple[str, ...]
    """Unique band texts, in band order."""
    size: int
    """Total bytes of its files (0 where unknown)."""
    versions: tuple[tuple[str, str], ...] = ()
    """``(identity, version)`` of each of its files (:func:`~pipelines.planning.hrefs.input_identity`,
    :attr:`~pipelines.planning.scene.Scene.version`; "" where unknown), sorted."""
    warp: Warp | None = None
    """Set once a rotated or off-grid acquisition is planned to be warped."""
    family: str | None = None
    """Cube family of its scenes (:attr:`pipelines.planning.scene.Scene.family`), or None."""
    tags: tuple[tuple[str, str], ...] = ()
    """Union of its scenes' tags, sorted."""
    replaces: tuple[str, ...] = ()
    """Files of older processings its scenes replace, sorted (:attr:`pipelines.planning.scene.Scene.replaces`)."""

    @property
    def hrefs(self) -> tuple[str, ...]:
        """Its files, sorted."""
        return tuple(sorted({href for href, _ in self.bands}))


class StackKey(NamedTuple):
    """What the files of one acquisition share (step 1); ordered field by field."""

    stack: str
    """:func:`~pipelines.planning.bands.stack_id` of the file."""
    time: int
    """POSIX seconds."""
    epsg: int
    """EPSG code."""
    transform: tuple[float, float, float, float, float, float]
    """Transform of the file."""
    height: int
    """Rows."""
    width: int
    """Columns."""
    pixel_is_point: bool
    """Raster type."""
    family: str
    """Cube family, ``""`` for none (a product family name is never empty)."""
    warped: bool
    """Whether the file is warped to be north-up: it and a north-up file on the same grid read differently."""


def _reject(acq: Acquisition, reason: str, message: str) -> list[DeadLetter]:
    return [DeadLetter(href, reason, message, STAGE) for href in acq.hrefs]


def _reject_series(acqs: list[Acquisition], winners: int, reason: str, text: Callable[[Acquisition], str], tail: str) -> list[DeadLetter]:
    """Dead letters of a losing series: ``<what each acquisition is>, while <the winner's acquisition count> <tail>``."""
    return [letter for acq in acqs for letter in _reject(acq, reason, f"{text(acq)}, while {winners} {tail}")]


def _band_order(scene: Scene) -> tuple[tuple[tuple[int, int | str], ...], str]:
    token = band_token(scene.href)
    return natural_key(token or scene.bands[0].name), scene.href


def _not_north_up(scene: Scene) -> str:
    """The message of a scene whose transform is not north-up: which way it is off, and how to have it warped."""
    a, b, _, d, e, _ = scene.transform
    how = "south-up (rows run north)" if b == 0 and d == 0 and a > 0 and e > 0 else "rotated, sheared or mirrored"
    once = _ONCE_IT_HAS_NODATA if scene.nodata is None and not _turns_exactly(scene.transform) else ""
    return (
        f"transform {scene.transform} is {how}; pass --align reproject to warp it onto a north-up grid{once},"
        f" or warp it first (e.g. gdalwarp -t_srs EPSG:{scene.epsg})"
    )


_ONCE_IT_HAS_NODATA: Final = " once it has a nodata value to mark the pixels the warp leaves uncovered (e.g. gdal_edit.py -a_nodata N)"
"""Advice to pass ``--align reproject`` to a scene without nodata: that warp would refuse it (:data:`_NOTHING_TO_FILL_WITH`)."""


_NOTHING_TO_FILL_WITH: Final = (
    "; warped onto the grid, it would leave pixels no source pixel covers, which it has no nodata value to mark"
    " (0 would pass for data): set one first (e.g. gdal_edit.py -a_nodata N)"
)
"""Why a scene without nodata is not warped (``--align reproject``) where the warp leaves pixels uncovered."""


def _turns_exactly(transform: Sequence[float]) -> bool:
    """Whether a transform that is not north-up is only mirrored or turned by a multiple of 90 degrees.

    Such a raster maps pixel for pixel onto its north-up grid
    (:func:`~pipelines.planning.lattice.north_up`), which it covers whole; any
    other angle leaves the new grid's corners uncovered.
    """
    a, b, _, d, e, _ = transform[:6]
    return (b == 0 and d == 0) or (a == 0 and e == 0)


def _is_unnamed(scene: Scene) -> bool:
    """Whether ``scene`` is a single-band file whose band has only the fallback name (``band 1``)."""
    if len(scene.bands) != 1 or band_token(scene.href) is not None:
        return False
    band = scene.bands[0]
    return not band.description and band.name == f"band {band.index}"


def name_quantities(scenes: Iterable[Scene]) -> list[Scene]:
    """Name the unnamed single-band files that are quantities of one scene, and stack them by dtype and nodata.

    Such a file (no band token, description or STAC name) has the fallback
    band name ``band 1``, so two of them at one time on one raster would be
    two acquisitions of one quantity: duplicates. Where they lie in one
    directory, carry one scene ID (:func:`~pipelines.planning.bands.stem_id`:
    the parts of their stems with digits) and the names of their stems
    (:func:`~pipelines.planning.bands.stem_name`) all differ, they are
    different quantities of one scene instead: Landsat Collection 2 Level-2
    keeps ``QA_PIXEL``, ``QA_RADSAT``, ``SR_QA_AEROSOL`` and eight ``ST_*``
    layers beside its banded ``SR_B*`` files, each after the product ID.
    Each band then takes its stem's name, and the files of one dtype and
    nodata share a stack, so they become the bands of one acquisition; a
    scene's quantities of another dtype or nodata (Landsat's uint8
    ``SR_QA_AEROSOL``) make their own, not dtype mismatches.

    A folder of one scene's files may carry the scene ID in its own name
    instead (Earth Search's ``S2A_33UUU_20230612_0_L2A/`` holds ``B02.tif``
    beside ``AOT.tif`` and ``WVP.tif``): unnamed files without a scene ID are
    quantities of one scene too where a file with a band token lies beside
    them at their time, on their raster. Elsewhere such files (``a.tif`` and
    ``b.tif``) stay what they were, two acquisitions for ``--duplicates`` to
    resolve: nothing says they are one scene. So do files whose stems name one
    quantity, or none. Scenes come back in input order.
    """
    scenes = list(scenes)

    def place(scene: Scene) -> tuple[str, int, Grid, str]:
        return directory(scene.href), scene.time, scene.grid, scene.family or ""

    banded = {place(scene) for scene in scenes if band_token(scene.href) is not None}
    groups: dict[tuple[str, int, Grid, str, str], list[int]] = defaultdict(list)
    for i, scene in enumerate(scenes):
        if not _is_unnamed(scene):
            continue
        where, scene_id = place(scene), stem_id(scene.href)
        if scene_id or where in banded:
            groups[(*where, scene_id or "")].append(i)
    for (folder, *_, scene_id), members in groups.items():
        stems = [stem_name(scenes[i].href) for i in members]
        named = [stem for stem in stems if stem is not None]
        if len(members) < 2 or len(set(named)) != len(stems):
            continue
        for i, stem in zip(members, named, strict=True):
            scene = scenes[i]
            kind = f"{folder}/{scene_id}{{{scene.dtype}, nodata {scene.nodata_key}}}"  # one stack per scene, dtype and nodata
            scenes[i] = replace(scene, stack=kind, bands=(replace(scene.bands[0], name=stem),))
    return scenes


def stack_scenes(
    scenes: Iterable[Scene], *, align: str = "fail", resampling: str = "nearest"
) -> tuple[list[Acquisition], list[DeadLetter]]:
    """Stack scenes into acquisitions (step 1); return them and the dtype mismatches.

    A scene whose transform is not north-up is rejected here, or with
    ``align="reproject"`` planned to be warped (with ``resampling``) onto
    the grid of :func:`~pipelines.planning.lattice.north_up`, where it then
    counts as any other scene of that grid.
    """
    rejects: list[DeadLetter] = []
    stacks: dict[StackKey, list[Scene]] = defaultdict(list)
    for scene in name_quantities(scenes):
        warped = not is_north_up(scene.transform)
        if warped and align != "reproject":
            rejects.append(DeadLetter(scene.href, "rotated", _not_north_up(scene), STAGE))
            continue
        if warped and scene.nodata is None and not _turns_exactly(scene.transform):
            message = f"transform {scene.transform} is rotated or sheared{_NOTHING_TO_FILL_WITH}"
            rejects.append(DeadLetter(scene.href, "rotated", message, STAGE))
            continue
        if warped:
            transform, height, width = north_up(scene.transform, scene.height, scene.width)
            scene = replace(scene, grid=replace(scene.grid, transform=transform, height=height, width=width))
        key = StackKey(
            scene.stack,
            scene.time,
            scene.epsg,
            scene.transform,
            scene.height,
            scene.width,
            scene.pixel_is_point,
            scene.family or "",
            warped,
        )
        stacks[key].append(scene)
    out: list[Acquisition] = []
    for key in sorted(stacks):
        members = sorted(stacks[key], key=_band_order)
        kinds = Counter((m.dtype, m.nodata_key) for m in members)
        first = (members[0].dtype, members[0].nodata_key)
        top = max(kinds.values())
        keep = first if kinds[first] == top else min(k for k, n in kinds.items() if n == top)
        kept = [m for m in members if (m.dtype, m.nodata_key) == keep]
        for m in members:
            if (m.dtype, m.nodata_key) != keep:
                rejects.append(
                    DeadLetter(
                        m.href,
                        "dtype-mismatch",
                        f"dtype {m.dtype} with nodata {m.nodata_key}, while the other bands of {m.stack} at {format_seconds(m.time)} "
                        f"are {keep[0]} with nodata {keep[1]}",
                        STAGE,
                    )
                )
        bands = tuple((m.href, b) for m in kept for b in m.bands)
        head = kept[0]
        out.append(
            Acquisition(
                time=head.time,
                grid=head.grid,
                dtype=head.dtype,
                nodata=head.nodata,
                nodata_key=head.nodata_key,
                bands=bands,
                names=unique_band_texts([b.name for _, b in bands]),
                size=sum(m.size or 0 for m in kept),
                versions=tuple(sorted({(input_identity(m.href), m.version or "") for m in kept})),
                warp=Warp(head.transform, head.height, head.width, resampling) if key.warped else None,
                family=head.family,
                tags=tuple(sorted({t for m in kept for t in m.tags})),
                replaces=tuple(sorted({h for m in kept for h in m.replaces})),
            )
        )
    return out, rejects


Slot = tuple[int, float, float, bool, tuple[str, str], str]
"""What series compete for one cube in (:attr:`CubeKey.slot`)."""


class CubeKey(NamedTuple):
    """What the acquisitions of one series share (step 2); ordered field by field, so every sort is deterministic."""

    epsg: int
    """EPSG code of the CRS."""
    res_x: float
    """Pixel width of the lattice."""
    res_y: float
    """Pixel height of the lattice."""
    pixel_is_point: bool
    """Raster type."""
    period: tuple[str, str]
    """``(--cube-period label, family or "")``: a family (product-aware discovery) is part of the slot, so
    families never compete or share a cube."""
    vertical_crs: str
    """The vertical CRS of the values (:data:`~catalog.extension.VERTICAL_CRS`), or "": heights above different ones
    never compete or share a cube."""
    names: tuple[str, ...]
    """Unique band texts, in band order."""
    dtype: str
    """Shared dtype."""
    nodata_key: str
    """:func:`pipelines.planning.scene.nodata_key` of the shared nodata."""
    radiometry: tuple[tuple[float, float, str], ...]
    """``(scale, offset, unit or "")`` of every band, in band order. A cube records one per band, so acquisitions
    whose values mean different things (a processing baseline that adds an offset) make separate cubes, which
    do not compete (:func:`_same_radiometry`)."""

    @classmethod
    def of(cls, acq: Acquisition, options: ConvertOptions) -> CubeKey:
        """The series key of an acquisition."""
        lattice = acq.lattice
        period = (period_label(acq.time, options.cube_period), acq.family or "")
        radiometry = tuple((band.scale, band.offset, band.unit or "") for _, band in acq.bands)
        vertical = dict(acq.tags).get(VERTICAL_CRS, "")
        return cls(
            acq.epsg, lattice.res_x, lattice.res_y, acq.pixel_is_point, period, vertical, acq.names, acq.dtype, acq.nodata_key, radiometry
        )

    @property
    def slot(self) -> Slot:
        """CRS, pixel size, raster type, period and vertical CRS: series in one slot compete for the same cube."""
        return self.epsg, self.res_x, self.res_y, self.pixel_is_point, self.period, self.vertical_crs


def _dtype_text(acq: Acquisition) -> str:
    return f"dtype {acq.dtype} with nodata {acq.nodata_key}"


def _short(names: Iterable[str]) -> str:
    """Band names as a message lists them: a band text's first part (``B04`` of ``B04, red, 664.6nm ...``)."""
    return ", ".join(name.split(",", 1)[0] for name in names)


def _bands_text(acq: Acquisition) -> str:
    return f"{len(acq.names)} band{'' if len(acq.names) == 1 else 's'} ({_short(acq.names)})"


def _alongside(series: dict[CubeKey, list[Acquisition]], key: CubeKey, other: CubeKey) -> bool:
    """Whether ``other`` has an acquisition at every time ``key`` has one: a product beside it, not an odd one out.

    A Sentinel-2 L2A granule's detector masks (``MSK_DETFOO_B02.jp2``, uint8)
    carry the band tokens of its reflectances (uint16), and its 8-band
    quality masks (``MSK_QUALIT_B02.jp2``) the fallback names of its 3-band
    true-colour image, at the granule's one time. The mismatch rules are for
    acquisitions at other times that miss what the series has.
    """
    return {acq.time for acq in series[key]} <= {acq.time for acq in series[other]}


def _newer_and_short(short: list[Acquisition], full: list[Acquisition]) -> bool:
    """Whether each of ``short``'s acquisitions is a newer processing of a Sentinel-2 datatake ``full`` holds at its time.

    A product beside a series at its times (:func:`_alongside`) with fewer
    bands is most often another product of the same acquisition (a
    granule's masks). A newer processing of the same datatake with fewer
    bands than the older is one not yet whole (a synchronisation that has
    not finished): beside the older one's cube it would make a second cube
    of that time, of the bands it has so far.
    """
    held = {(acq.time, p.datatake): p.processing for acq in full if (p := _product(acq)) is not None}
    for acq in short:
        product = _product(acq)
        older = None if product is None else held.get((acq.time, product.datatake))
        if product is None or older is None or older >= product.processing:
            return False
    return True


def _same_radiometry(a: CubeKey, b: CubeKey) -> bool:
    """Whether the bands two series share have one scale, offset and unit: only then is one the odd one out."""
    first = dict(zip(a.names, a.radiometry, strict=True))
    return all(first.get(name, value) == value for name, value in zip(b.names, b.radiometry, strict=True))


def _dtype_losers(series: dict[CubeKey, list[Acquisition]], keys: list[CubeKey], where: str) -> dict[CubeKey, list[DeadLetter]]:
    """Same bands, another dtype or nodata, at other times: the series with most acquisitions wins."""
    losers: dict[CubeKey, list[DeadLetter]] = {}
    for _, group in itertools.groupby(sorted(keys, key=lambda k: k.names), key=lambda k: k.names):
        variants = sorted(group, key=lambda k: (-len(series[k]), k.dtype, k.nodata_key))
        winner = variants[0]
        for loser in variants[1:]:
            if _alongside(series, loser, winner) or not _same_radiometry(loser, winner):
                continue
            tail = f"other acquisitions with the same bands on {where} are {winner.dtype} with nodata {winner.nodata_key}"
            losers[loser] = _reject_series(series[loser], len(series[winner]), "dtype-mismatch", _dtype_text, tail)
    return losers


def _band_count_losers(series: dict[CubeKey, list[Acquisition]], alive: list[CubeKey], where: str) -> dict[CubeKey, list[DeadLetter]]:
    """Nested band sets at other times: the series with fewer acquisitions (the subset on a tie) is the odd one."""
    losers: dict[CubeKey, list[DeadLetter]] = {}
    for a, b in itertools.permutations(alive, 2):
        if not set(a.names) < set(b.names) or (a.dtype, a.nodata_key) != (b.dtype, b.nodata_key) or not _same_radiometry(a, b):
            continue
        loser, winner = (a, b) if len(series[a]) <= len(series[b]) else (b, a)
        if loser in losers:
            continue
        if _alongside(series, loser, winner):
            if _newer_and_short(series[loser], series[winner]):
                missing = _short(n for n in winner.names if n not in loser.names)
                tail = (
                    f"an older processing of its Sentinel-2 datatake on {where} has {len(winner.names)}: it lacks {missing} "
                    "(still being copied?), so the older processing stays until it holds them"
                )
                losers[loser] = [
                    letter for acq in series[loser] for letter in _reject(acq, "incomplete-scene", f"{_bands_text(acq)}, while {tail}")
                ]
            continue
        lacking = [n for n in winner.names if n not in loser.names]
        differ = f"it lacks {_short(lacking)}" if lacking else f"it has {_short(n for n in loser.names if n not in winner.names)} more"
        tail = f"other acquisitions on {where} have {len(winner.names)} ({_short(winner.names)}): {differ}"
        losers[loser] = _reject_series(series[loser], len(series[winner]), "band-count-mismatch", _bands_text, tail)
    return losers


def _areas(series: dict[CubeKey, list[Acquisition]], keys: list[CubeKey]) -> list[list[CubeKey]]:
    """``keys`` (of one slot) in groups whose footprints overlap, directly or through others of the group, each sorted.

    The mismatch rules find the odd acquisitions of one place: a series of
    another area, with another nodata or band set, is a cube of its own.
    """
    boxes = {key: sorted({acq.grid.bounds() for acq in series[key]}) for key in keys}

    def overlap(a: CubeKey, b: CubeKey) -> bool:
        return any(p[0] < q[2] and q[0] < p[2] and p[1] < q[3] and q[1] < p[3] for p in boxes[a] for q in boxes[b])

    groups: list[list[CubeKey]] = []
    for key in sorted(keys):
        touching = [group for group in groups if any(overlap(key, other) for other in group)]
        groups = [group for group in groups if group not in touching] + [sorted([key, *(k for g in touching for k in g)])]
    return sorted(groups)


def _mismatches(series: dict[CubeKey, list[Acquisition]]) -> tuple[set[CubeKey], list[DeadLetter]]:
    """Step 2: the series that lose a dtype or band-count comparison with a series of the same place, and their dead letters."""
    rejects: list[DeadLetter] = []
    losers: set[CubeKey] = set()
    by_slot: dict[Slot, list[CubeKey]] = defaultdict(list)
    for key in series:
        by_slot[key.slot].append(key)
    for slot in sorted(by_slot):
        label = slot[4][0]
        where = f"EPSG:{slot[0]} at {slot[1]:g} x {slot[2]:g}" + (f" in {label}" if label else "")
        for keys in _areas(series, by_slot[slot]):
            for loser, letters in _dtype_losers(series, keys, where).items():
                losers.add(loser)
                rejects += letters
            for loser, letters in _band_count_losers(series, [k for k in keys if k not in losers], where).items():
                losers.add(loser)
                rejects += letters
    return losers, rejects


def _align(acqs: list[Acquisition], options: ConvertOptions) -> tuple[Lattice, list[tuple[Acquisition, Extent]], list[DeadLetter]]:
    """Step 3: the series' grid, each kept acquisition with its extent on it, and the off-grid rejects."""
    counts = Counter(acq.lattice for acq in acqs)
    top = max(counts.values())
    grid = min(g for g, n in counts.items() if n == top)
    placed: list[tuple[Acquisition, Extent]] = []
    rejects: list[DeadLetter] = []
    for acq in acqs:
        if acq.lattice == grid:
            placed.append((acq, grid.extent(acq.transform, acq.height, acq.width)))
            continue
        if options.align == "reproject" and acq.nodata is not None:
            extent = snap_extent(grid, acq.transform, acq.height, acq.width)
            warp = Warp(grid.transform(extent), extent.height, extent.width, options.resampling)
            placed.append((replace(acq, warp=warp), extent))
            continue
        # Warped onto the grid, its extent snaps outwards: an edge row or column is left uncovered.
        once = _ONCE_IT_HAS_NODATA if acq.nodata is None else ""
        # Warped, it covers whole pixels of the grid, one more row or column than theirs: a cube of its own unless unioned.
        union = ", with --extent union to put it in their cube (warped, its extent grows to whole pixels)"
        union = union if options.extent != "union" else ""
        fix = _NOTHING_TO_FILL_WITH if options.align == "reproject" else f"; pass --align reproject to warp it onto that grid{once}{union}"
        rejects += _reject(
            acq,
            "off-grid",
            f"grid alignment {acq.lattice.alignment} (origin mod pixel size, in pixels) differs from {grid.alignment}, held by "
            f"{top} acquisitions with the same bands on EPSG:{grid.epsg}{fix}",
        )
    return grid, placed, rejects


def _product(acq: Acquisition) -> S2Product | None:
    """The one Sentinel-2 product all of an acquisition's files name, or None."""
    products = {product_of(href) for href in acq.hrefs}
    return products.pop() if len(products) == 1 else None


def _newest_processings(
    items: list[tuple[Acquisition, Extent]], *, mosaic: bool
) -> tuple[list[tuple[Acquisition, Extent]], list[Acquisition]]:
    """The acquisitions at one time that no newer processing of their Sentinel-2 datatake replaces, and the others.

    Two processings of one datatake (a SAFE of baseline ``N0510`` and its
    re-processing ``N0511``, or Earth Search's ``S2A_31UGT_20240315_0_L2A``
    and ``..._1_L2A``) are two versions of one acquisition, not two
    acquisitions: ``--duplicates`` cannot choose between them by path order
    (``_9_`` sorts after ``_10_``), refusing both loses a date that one
    product was enough to fill (and on a nightly run, a date already served),
    and a mosaic would mix the values of two processings. So the newest
    processing (:attr:`~pipelines.sentinel2.products.S2Product.version`) is kept,
    whatever ``--duplicates`` says, as the STAC route keeps it
    (:func:`pipelines.sentinel2.items.keep_newest`), and the older ones are
    dropped. SAFE products of the newest baseline are all kept: they are the
    parts of a tile ESA cut at a datastrip boundary (:func:`_parts_of_one_datatake`).
    Acquisitions whose files name no product, or not one, and the
    newest of each datatake (several, where they tie) are left to
    ``--duplicates``. The choice depends on the names alone, never on order.

    With ``mosaic``, products that may be two passes of one day (Earth
    Search's numbers, :attr:`~pipelines.sentinel2.products.S2Product.one_pass`)
    are mosaicked as asked: keeping one would lose the other pass's pixels.
    """
    products = [p if p is not None and (p.one_pass or not mosaic) else None for p in (_product(acq) for acq, _ in items)]
    newest = newest_versions(products)
    kept = [item for item, p in zip(items, products, strict=True) if p is None or p.version == newest[p.datatake]]
    older = [acq for (acq, _), p in zip(items, products, strict=True) if p is not None and p.version != newest[p.datatake]]
    return kept, older


def _parts_of_one_datatake(kept: list[tuple[Acquisition, Extent]]) -> list[tuple[Acquisition, Extent]] | None:
    """Several SAFE products of one datatake and baseline, the latest generation first; None for anything else.

    ESA cuts a datatake's tile into two products where it spans two
    datastrips; they share sensing time, orbit and baseline, differ in
    generation time, and each covers a part of the tile, the rest nodata.
    Their mosaic is the acquisition, whatever ``--duplicates`` says: keeping
    one loses the other's part, and refusing both the date. A regeneration of
    one product covers what it covers, so its pixels win and the mosaic is it.
    """
    products = [p for acq, _ in kept if (p := _product(acq)) is not None and p.one_pass]
    if len(kept) < 2 or len(products) != len(kept) or len({p.datatake for p in products}) != 1:
        return None
    latest_first = sorted(zip(products, kept, strict=True), key=lambda pair: pair[0].processing, reverse=True)
    return [item for _, item in latest_first]


def _named(acq: Acquisition) -> str:
    """What names an acquisition in a message: its Sentinel-2 product, else its first file."""
    product = _product(acq)
    return product.name if product is not None else acq.hrefs[0]


def _resolve_duplicates(
    placed: list[tuple[Acquisition, Extent]], options: ConvertOptions, grid: Lattice
) -> tuple[list[list[tuple[Acquisition, Extent]]], list[str], list[DeadLetter]]:
    """Step 5: one list of acquisitions per time step (several only for mosaics), dropped hrefs, rejects.

    Older processings of a Sentinel-2 datatake are dropped first
    (:func:`_newest_processings`); ``--duplicates`` decides among the rest.
    """
    by_time: dict[int, list[tuple[Acquisition, Extent]]] = defaultdict(list)
    for item in placed:
        by_time[item[0].time].append(item)
    steps: list[list[tuple[Acquisition, Extent]]] = []
    dropped: list[str] = []
    rejects: list[DeadLetter] = []
    for time in sorted(by_time):
        # By the files' identities, links resolved, as the cube's name hashes them: one set of files through another
        # link would otherwise mosaic in another order, or keep another first, under the same name.
        items = sorted(by_time[time], key=lambda item: [input_identity(h) for h in item[0].hrefs])
        kept, older = _newest_processings(items, mosaic=options.duplicates == "mosaic")
        parts = _parts_of_one_datatake(kept)
        if parts is not None:
            steps.append(parts)
            dropped += [h for acq in older for h in acq.hrefs]
            continue
        if len(kept) == 1 or options.duplicates == "mosaic":
            steps.append(kept)
            dropped += [h for acq in older for h in acq.hrefs]
            continue
        if options.duplicates == "error":
            # The time step is left out, so every acquisition at it is a dead letter, older processings too.
            for acq, _ in items:
                others = [other for other, _ in items if other is not acq]
                more = f" and {len(others) - 1} more" if len(others) > 1 else ""
                count = "1 other acquisition" if len(others) == 1 else f"{len(others)} other acquisitions"
                rejects += _reject(
                    acq,
                    "duplicate-time",
                    f"{format_seconds(time)} on {grid.slug()} is also the time of {count} "
                    f"({_named(others[0])}{more}), so this time step is left out of the cube; "
                    "pass --duplicates first, last or mosaic to keep it",
                )
            continue
        keep = kept[0] if options.duplicates == "first" else kept[-1]
        steps.append([keep])
        dropped += [h for acq, _ in items if acq is not keep[0] for h in acq.hrefs]
    return steps, dropped, rejects


def _build(steps: list[list[tuple[Acquisition, Extent]]], grid: Lattice, dropped: Sequence[str], options: ConvertOptions) -> CubePlan:
    extent = Extent.union_all(e for step in steps for _, e in step)
    ref, ref_extent = steps[0][0]
    a, _, c, _, e, f = ref.warp.transform if ref.warp else ref.transform
    transform = (a, 0.0, c + (extent.col - ref_extent.col) * a, 0.0, e, f + (extent.row - ref_extent.row) * e)
    sources = tuple(
        tuple(
            tuple(
                Source(acq.bands[b][0], acq.bands[b][1].index, ext.row - extent.row, ext.col - extent.col, ext.height, ext.width, acq.warp)
                for acq, ext in step
            )
            for b in range(len(ref.names))
        )
        for step in steps
    )
    acqs = [acq for step in steps for acq, _ in step]
    inputs = tuple(sorted({h for acq in acqs for h in acq.hrefs}))
    times = tuple(step[0][0].time for step in steps)
    names = list(ref.names)
    per_file = Counter(href for href, _ in ref.bands)
    for b, (href, info) in enumerate(ref.bands):
        if per_file[href] != 1:
            continue  # a file's name names none of its several bands
        # A band that only has its fallback name ("band N") takes the name its files share
        # (fmask for every *_fmask.tif of a series). Grouping used the fallback name, so
        # files with different stems still form one cube; they just keep "band N".
        stems = {stem_name(src.href) for step in sources for src in step[b]}
        (stem,) = stems if len(stems) == 1 else (None,)
        if stem and not info.description and names[b] == f"band {info.index}" and stem not in names:
            names[b] = stem
    bands = tuple(
        CubeBand(name, info.description, info.scale, info.offset, info.unit, info.categorical)
        for name, (_, info) in zip(names, ref.bands, strict=True)
    )
    if ref.family:
        label = period_label(ref.time, options.cube_period)
        cube_id = f"{ref.family}_{label}" if label else ref.family
    else:
        cube_id = cube_name(grid_slug=grid.slug(), transform=transform, times=times, hrefs=inputs)
    values: dict[str, set[str]] = defaultdict(set)
    for acq in acqs:
        for key, value in acq.tags:
            values[key].add(value)
    return CubePlan(
        cube_id=cube_id,
        grid=Grid(ref.grid.crs, transform, extent.height, extent.width, ref.pixel_is_point),
        dtype=ref.dtype,
        nodata=ref.nodata,
        bands=bands,
        times=times,
        sources=sources,
        tile_size=options.tile_size,
        frame_unit=choose_frame_unit(options.frame_unit, bands=len(bands), times=len(times)),
        compression=options.compression,
        inputs=inputs,
        input_bytes=sum(acq.size for acq in acqs),
        input_version=inputs_version(pair for acq in acqs for pair in acq.versions),
        dropped=tuple(sorted({*dropped, *(h for step in steps for acq, _ in step for h in acq.replaces)})),
        max_abs_error=options.max_abs_error,
        max_rel_error=options.max_rel_error,
        tags=tuple((key, tuple(sorted(values[key]))) for key in sorted(values)),
        named_by_period=bool(ref.family),
    )


def _extracted_instead(scenes: dict[str, Scene]) -> tuple[dict[str, Scene], list[DeadLetter]]:
    """``scenes`` without the members of archives whose extraction beside them is among ``scenes``, and dead letters.

    A folder of downloads often holds both ``x.zip`` and the product that
    unzipping it gave: read as they are, each band would be two scenes at one
    time. The extracted files are read, and the archive is not
    (:func:`~pipelines.archives.extracted_paths`). A member the extraction
    lacks, of an interrupted extraction or a pruned folder, is a dead letter
    rather than a second acquisition beside the folder's.
    """
    extracted = {archive_of(h): p for h in scenes for p in extracted_paths(h) if p in scenes}
    kept: dict[str, Scene] = {}
    rejects: list[DeadLetter] = []
    for href, scene in scenes.items():
        archive = archive_of(href)
        if archive not in extracted:
            kept[href] = scene
        elif not any(p in scenes for p in extracted_paths(href)):
            message = (
                f"{archive} is also extracted beside it (as {extracted[archive]}), and its extracted files are read instead; "
                "this member is not among them: extract the archive again, or remove either the folder or the archive"
            )
            rejects.append(DeadLetter(href, "extracted", message, STAGE))
    return kept, rejects


def _incomplete(scenes: dict[str, Scene], unread: Iterable[str]) -> tuple[dict[str, Scene], list[DeadLetter]]:
    """The scenes none of whose band files failed to read, and dead letters for the others.

    A scene's band files (one :func:`~pipelines.planning.bands.stack_id`: a
    folder of Earth Search COGs, a SAFE granule's ``T33UUU_<time>_B02_10m``
    files) make one acquisition. Without the one that could not be read
    (truncated, corrupt, still being copied) the others would make a cube of
    fewer bands, published wherever no other scene of its period shows the
    band set to be short, and replaced once the file is mended. So the scene
    is left out whole, as when the file is read and found wanting.
    """
    broken: dict[str, str] = {}
    for href in sorted(unread):
        broken.setdefault(stack_id(href), href)
    kept: dict[str, Scene] = {}
    rejects: list[DeadLetter] = []
    for href, scene in scenes.items():
        failed = broken.get(stack_id(href))
        if failed is None:
            kept[href] = scene
            continue
        message = f"{failed}, a band file of the same scene, could not be read, so the scene is left out whole"
        rejects.append(DeadLetter(href, "incomplete-scene", message, STAGE))
    return kept, rejects


def plan_cubes(scenes: Iterable[Scene], options: ConvertOptions, unread: Iterable[str] = ()) -> tuple[list[CubePlan], list[DeadLetter]]:
    """Plan every cube of a run from its scenes' metadata.

    Args:
        scenes: Every readable scene of the run, in any order; hrefs of one
            file (repeated, or through a link: :func:`~pipelines.planning.hrefs.one_href_per_file`)
            count once, and an archive extracted beside itself is read from
            its extracted files (:func:`_extracted_instead`).
        options: The run's options (period, alignment, extent, duplicates,
            tiling, frame unit, compression).
        unread: The files of the run that could not be read (dead letters of
            reading): the other band files of their scenes are left out too
            (:func:`_incomplete`).

    Returns:
        The cube plans sorted by id, and the dead letters sorted by href.
    """
    by_href = {s.href: s for s in sorted(scenes, key=lambda s: (s.href, s.time), reverse=True)}
    # One href per file, whichever input text found it.
    unique, rejects = _extracted_instead({h: by_href[h] for h in one_href_per_file(by_href).values()})
    unique, more = _incomplete(unique, unread)
    rejects += more
    acquisitions, more = stack_scenes((unique[h] for h in sorted(unique)), align=options.align, resampling=options.resampling)
    rejects += more
    series: dict[CubeKey, list[Acquisition]] = defaultdict(list)
    for acq in acquisitions:
        series[CubeKey.of(acq, options)].append(acq)
    losers, more = _mismatches(series)
    rejects += more
    plans: list[CubePlan] = []
    for key in sorted(series):
        if key in losers:
            continue
        grid, placed, more = _align(series[key], options)
        rejects += more
        groups: dict[Extent | None, list[tuple[Acquisition, Extent]]] = defaultdict(list)
        for acq, extent in placed:
            union = options.extent == "union" and acq.nodata is not None
            groups[None if union else extent].append((acq, extent))
        for group_key in sorted(groups, key=lambda g: (g is not None, g)):  # one None (a union) or extents
            steps, dropped, more = _resolve_duplicates(groups[group_key], options, grid)
            rejects += more
            if not steps:
                continue
            plan = _build(steps, grid, dropped, options)
            try:
                plan.check_storable()
            except InvalidInputError as err:
                rejects += [DeadLetter(h, "invalid-cube", f"cube {plan.cube_id} cannot be stored: {err}", STAGE) for h in plan.inputs]
                continue
            lay = plan.layout
            per_frame = math.prod(lay.frame_shape(0))  # the top-left tile: a whole tile wherever the image has one
            if lay.tiles_across * lay.tiles_down > 1 and per_frame < MIN_FRAME_SAMPLES:
                y0, y1, x0, x1 = lay.tile_bounds(0, 0)
                at_least = smallest_tile_size(lay.image_length, lay.image_width, per_frame // ((y1 - y0) * (x1 - x0)))
                message = (
                    f"--tile-size {options.tile_size} cuts cube {plan.cube_id} into frames of {per_frame} samples, fewer than "
                    f"{MIN_FRAME_SAMPLES}: each frame's own bytes would outweigh its pixels; use --tile-size {at_least} or more"
                )
                rejects += [DeadLetter(h, "tile-size", message, STAGE) for h in plan.inputs]
                continue
            plans.append(plan)
    # A family names its cubes by period alone, so one family and period on two extents would write one file twice:
    # the cube with most acquisitions keeps the name (ties: the first extent), the others are dead letters.
    by_id: dict[str, list[CubePlan]] = defaultdict(list)
    for plan in plans:
        by_id[plan.cube_id].append(plan)
    kept: list[CubePlan] = []
    for cube_id in sorted(by_id):
        ranked = sorted(by_id[cube_id], key=lambda p: (-len(p.times), p.transform[2], -p.transform[5]))
        kept.append(ranked[0])
        for loser in ranked[1:]:
            rejects += [
                DeadLetter(h, "family-extent", f"cube {cube_id} is already planned on another extent of the same grid", STAGE)
                for h in loser.inputs
            ]
    return kept, sorted(rejects)
