"""Conversion options: everything ``rumi convert`` decides before reading a pixel.

:class:`ConvertOptions` is an immutable value object
whose fields are the whole configuration of a conversion apart from the Beam
runner; the transforms take it as a field, so it travels to the workers by
pickling. Each field is checked when the object is built, and a bad value
raises :class:`~pipelines.errors.OptionError` naming the command-line option.

>>> ConvertOptions(out="/tmp/out", frame_unit="auto", cube_period="P1M").cube_period
'P1M'
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any, Final, Literal

from pipelines.errors import OptionError
from pipelines.sentinel2.bands import select_bands
from pipelines.sentinel2.search import S2Request
from rumi_core.codecs import BoundedCodec, ErrorBound, parse_codec, parse_error_bound
from rumi_core.compression import MODES
from rumi_core.errors import InvalidInputError
from rumi_core.times import to_seconds

__all__ = [
    "ALIGN_MODES",
    "AUTO",
    "CUBE_PERIODS",
    "DUPLICATE_MODES",
    "EXTENT_MODES",
    "RESAMPLING_METHODS",
    "ConvertOptions",
    "parse_compression",
    "parse_error_bound_options",
    "parse_frame_unit_option",
]

AUTO: Final = "auto"
"""Let the pipeline choose (the defaults of :mod:`pipelines.planning.codec_choice`)."""

LICENSE: Final = re.compile(r"[\w\-.+]+")
"""A ``license`` STAC 1.1 takes (its licensing schema): an SPDX identifier such as ``CC-BY-4.0``, or ``other``."""

CUBE_PERIODS: Final = ("none", "P1M", "P3M", "P1Y")
"""``--cube-period`` values: one cube per grid, per month, per quarter or per year."""

ALIGN_MODES: Final = ("fail", "reproject")
"""``--align``: off-grid, rotated and south-up scenes go to the dead-letter output, or are warped onto a north-up group grid."""

DUPLICATE_MODES: Final = ("error", "first", "last", "mosaic")
"""``--duplicates``: what to do with two scenes of one grid at one instant."""

EXTENT_MODES: Final = ("separate", "union")
"""``--extent``: one cube per extent, or one cube over the union of the extents with nodata fill."""

RESAMPLING_METHODS: Final = ("nearest", "bilinear", "cubic", "cubic_spline", "lanczos", "average", "mode", "min", "max", "med", "q1", "q3")
"""``--resampling`` values, the names of :class:`rasterio.enums.Resampling` members usable for warping."""


def parse_frame_unit_option(value: object) -> int | Literal["auto"]:
    """Return ``"auto"`` or the frame unit number 0..9 from an option value.

    Raises:
        OptionError: neither ``auto`` nor an integer from 0 to 9.
    """
    if value == AUTO:
        return AUTO
    try:
        unit = int(str(value))
    except ValueError:
        unit = -1
    if not 0 <= unit <= 9:
        raise OptionError(f"expected auto or a frame unit from 0 to 9, got {value!r}", option="--frame-unit")
    return unit


def parse_compression(value: object) -> str:
    """Return a canonical compression option: a selection mode or a codec's JSON text.

    ``value`` is a selection mode (``auto``, ``max``, ``portable``: measured
    per cube by :mod:`pipelines.planning.codec_choice`), a registered codec name (``raster``, ``openzl``,
    ``geozl``) or a codec's JSON form ``{"name": ..., "configuration": ...}``.
    The JSON text is canonical (sorted keys), so equal codecs give equal options.

    Raises:
        OptionError: the value names no codec or has a bad configuration.
    """
    if value in MODES:
        return str(value)
    text = str(value).strip()
    spec: Any = text
    if text.startswith("{"):
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as err:
            raise OptionError(f"not valid JSON: {err}", option="--compression") from err
    try:
        codec = parse_codec(spec)
    except InvalidInputError as err:
        raise OptionError(str(err), option="--compression") from err
    return json.dumps(codec.to_dict(), sort_keys=True)


def parse_error_bound_options(max_abs_error: object, max_rel_error: object) -> ErrorBound | None:
    """The error bound of ``--max-abs-error E`` or ``--max-rel-error P%``; None for lossless.

    Raises:
        OptionError: both are given, or one is malformed, negative or not finite.

    >>> parse_error_bound_options(None, "0.5%")
    ErrorBound(kind='relative', value='0.5')
    """
    try:
        return parse_error_bound(max_abs_error=max_abs_error, max_rel_error=max_rel_error)
    except InvalidInputError as err:
        option = "--max-rel-error" if err.field == "max_rel_error" or max_abs_error is None else "--max-abs-error"
        raise OptionError(str(err), option=option) from err


def _choice(value: str, allowed: tuple[str, ...], option: str) -> str:
    if value not in allowed:
        raise OptionError(f"expected one of {', '.join(allowed)}, got {value!r}", option=option)
    return value


@dataclass(frozen=True)
class ConvertOptions:
    """The configuration of one conversion."""

    out: str
    """Output directory: files, header blobs, manifest and dead-letter output go here."""
    tile_size: int = 512
    """Nominal tile size in pixels (``--tile-size``)."""
    frame_unit: int | Literal["auto"] = AUTO
    """``frame_unit`` of every file, or ``"auto"`` (``--frame-unit``)."""
    access: Literal["tile", "cell"] | None = "tile"
    """With ``--frame-unit auto``, the access pattern to keep (``--access``): ``tile``
    (the default) keeps one band and time per frame, ``cell`` whole cells, None
    (``--access any``) the smallest unit whatever it holds.

    Tile is the default because a frame is the smallest thing a reader decodes:
    measured on ``benchmarks/convert.py`` (20 dates x 4 bands, 2048², tiles 512),
    the smallest unit was a whole cell (42 MB decoded per frame), 7 % smaller
    (ratio 2.107 vs 1.967) but every single-date read decodes all 20 dates, and
    the conversion ran at 40 MB/s with 689 MiB per worker instead of 110 MB/s
    and 290 MiB."""
    compression: str = AUTO
    """A selection mode (``auto``, ``max``, ``portable``) or a codec's canonical JSON text (``--compression``),
    see :func:`parse_compression`."""
    max_abs_error: float | None = None
    """Absolute L∞ error bound in sample units (``--max-abs-error``); None or 0 for lossless."""
    max_rel_error: str | None = None
    """Relative error bound such as ``"1%"`` (``--max-rel-error``); None for lossless."""
    cube_period: str = "none"
    """How a grid's time series is split into cubes (``--cube-period``)."""
    align: str = "fail"
    """What happens to off-grid, rotated and south-up scenes (``--align``)."""
    resampling: str = "nearest"
    """Resampling of ``--align reproject``."""
    duplicates: str = "error"
    """What happens to two scenes of one grid at one instant (``--duplicates``)."""
    extent: str = "separate"
    """Whether differing extents on one grid become one cube (``--extent union``)."""
    time: str | None = None
    """Acquisition time of scenes that carry none (``--time``), ISO 8601."""
    time_pattern: str | None = None
    """Regular expression with named groups that finds a time in the input path (``--time-pattern``)."""
    overwrite: bool = False
    """Convert cubes whose outputs already exist and validate (``--overwrite``)."""
    prune: bool = False
    """Remove the cubes of earlier runs that this run's supersede (``--prune``; :mod:`pipelines.stale`)."""
    shards: int = 64
    """How many shards frame keys are generated in; bounds the parallelism of the frame stage."""
    verify_frames: int = 8
    """How many frames of each file are decoded and compared with the source before publishing."""
    catalog: str | None = None
    """Directory of the STAC catalogue (``--catalog``); None for ``OUT/stac``."""
    license: str | None = None
    """The data's licence (``--license``), an SPDX identifier or ``other``: every item this run writes carries it,
    and a collection whose items all carry one licence takes it (:func:`catalog.build_catalog`)."""
    write_catalog: bool = True
    """Write the STAC catalogue (``--no-catalog`` turns it off)."""
    run_id: str = "run"
    """Name of this run's folder of temporary objects in a ``gs://`` output, ``OUT/.rumi-tmp/<run_id>``, and of its
    claim on the bucket (:mod:`pipelines.bucket_claims`); each run has a fresh one. It shapes no output."""
    bands: str | None = None
    """Sentinel-2 L2A bands to convert (``--bands red,nir,scl``): ids, common names or asset keys; None for all."""
    resolution: int | None = None
    """Sentinel-2 L2A: None for one cube per resolution group, 10 for every band on the 10 m grid (``--resolution``)."""
    mgrs: tuple[str, ...] = ()
    """Sentinel-2 L2A MGRS tiles to keep (``--mgrs 33UUU,33UVU``); empty keeps all."""
    max_cloud: float | None = None
    """Sentinel-2 L2A: largest ``eo:cloud_cover`` kept, percent (``--max-cloud``)."""
    unreadable: tuple[tuple[str, str], ...] = ()
    """``(href, message)`` of scenes whose pixels an earlier pass of this run could not read:
    planned without, each a ``read-failed`` dead letter (:func:`pipelines.convert.run`)."""
    converted: tuple[str, ...] = ()
    """Ids of the cubes an earlier pass of this run wrote: kept as they are, also with ``--overwrite``."""

    def __post_init__(self) -> None:
        self._check_outputs()
        self._check_tiling()
        self._check_compression()
        _choice(self.cube_period, CUBE_PERIODS, "--cube-period")
        _choice(self.align, ALIGN_MODES, "--align")
        _choice(self.resampling, RESAMPLING_METHODS, "--resampling")
        _choice(self.duplicates, DUPLICATE_MODES, "--duplicates")
        _choice(self.extent, EXTENT_MODES, "--extent")
        self._check_time_options()
        if not 1 <= self.shards <= 1 << 16:
            raise OptionError(f"expected 1 to 65536 shards, got {self.shards}", option="--shards")
        self._check_sentinel2()
        if self.verify_frames < 0:
            raise OptionError(f"expected a count of at least 0, got {self.verify_frames}", option="--verify-frames")
        if self.license is not None and LICENSE.fullmatch(self.license) is None:
            raise OptionError(f"expected an SPDX license identifier such as CC-BY-4.0, or other, got {self.license!r}", option="--license")

    def _check_outputs(self) -> None:
        """``--out`` and ``--catalog``: present, and a bucket URL names a bucket."""
        if not self.out:
            raise OptionError("an output directory is required", option="--out")
        object.__setattr__(self, "out", os.fspath(self.out))
        if self.out.startswith("gs://"):
            object.__setattr__(self, "out", self.out.rstrip("/"))
            if self.out.count("/") < 2 or not self.out[5:]:
                raise OptionError(f"expected gs://BUCKET or gs://BUCKET/PREFIX, got {self.out!r}", option="--out")
        named = (("--out", self.out), ("--catalog", self.catalog)) if self.write_catalog else ()
        for option, where in named:
            # A STAC href is a URL, where "#" starts a fragment, "?" a query and ";" a segment's
            # parameters, "%" an escape, and tabs and line breaks are dropped (the WHATWG URL rules):
            # pystac would write the catalogue's documents to another path (";x" is cut off, a
            # line break removed), and a reader look for them, and for the files its items name,
            # elsewhere ("%20" read over HTTP as a space).
            text = None if where is None else os.fspath(where)
            if text is not None and (set(text) & set("#?;%") or any(ord(c) < 32 or ord(c) == 127 for c in text)):
                raise OptionError(
                    f"{text!r} holds '#', '?', ';', '%' or a control character, which STAC hrefs read as URL syntax; choose another name",
                    option=option,
                )
        if self.catalog is not None and not self.write_catalog:
            raise OptionError(
                "--catalog names where to write the catalogue, and --no-catalog writes none: give one of them", option="--catalog"
            )
        if self.catalog is not None and os.fspath(self.catalog).startswith("gs://"):
            object.__setattr__(self, "catalog", os.fspath(self.catalog).rstrip("/"))
            if not self.catalog[5:]:
                raise OptionError(f"expected gs://BUCKET or gs://BUCKET/PREFIX, got {self.catalog!r}", option="--catalog")
            if self.write_catalog and not self.out.startswith("gs://"):
                # Its items would point at paths on this machine, which no reader of the bucket can open.
                raise OptionError(
                    "a catalogue in a bucket describes files in a bucket; give --out gs://… or a local --catalog", option="--catalog"
                )

    def _check_tiling(self) -> None:
        """``--tile-size``, ``--frame-unit`` and ``--access``."""
        if isinstance(self.tile_size, bool) or not isinstance(self.tile_size, int) or not 1 <= self.tile_size <= 0xFFFF:
            raise OptionError(f"expected an integer from 1 to 65535, got {self.tile_size!r}", option="--tile-size")
        object.__setattr__(self, "frame_unit", parse_frame_unit_option(self.frame_unit))
        if self.access not in (None, "tile", "cell"):
            raise OptionError(f"expected tile or cell, got {self.access!r}", option="--access")

    def _check_compression(self) -> None:
        """``--compression`` and the lossy bound, in canonical form."""
        object.__setattr__(self, "compression", parse_compression(self.compression))
        bound = parse_error_bound_options(self.max_abs_error, self.max_rel_error)
        # Canonical form, so equal bounds give equal options (and equal plans on every worker).
        object.__setattr__(self, "max_abs_error", None if bound is None or bound.kind != "absolute" else float(bound.value))
        object.__setattr__(self, "max_rel_error", None if bound is None or bound.kind != "relative" else f"{bound.value}%")
        if bound is not None and self.compression not in MODES:
            codec = parse_codec(json.loads(self.compression))
            if not (isinstance(codec, BoundedCodec) and codec.bound == bound):
                raise OptionError(
                    "an error bound needs --compression auto or max (or a bounded codec with that bound)", option="--compression"
                )
        if bound is not None and self.compression == "portable":
            raise OptionError("portable frames cannot be lossy: geozl's quantizers need geozl's decoders", option="--compression")

    def _check_time_options(self) -> None:
        """``--time`` parses as ISO 8601; ``--time-pattern`` compiles and has named groups."""
        if self.time is not None:
            try:
                to_seconds(self.time)
            except InvalidInputError as err:
                # The reason when there is one beyond "not a time" (a fraction of a second), else an example.
                reason = (
                    err.message
                    if "fraction" in err.message
                    else f"expected an ISO 8601 time such as 2021-06-01T10:30:00Z, got {self.time!r}"
                )
                raise OptionError(reason, option="--time") from err
        if self.time_pattern is not None:
            try:
                compiled = re.compile(self.time_pattern)
            except re.error as err:
                raise OptionError(f"not a regular expression: {err}", option="--time-pattern") from err
            if not {"year", "date", "time"} & set(compiled.groupindex):
                named = f" (it names {', '.join(compiled.groupindex)})" if compiled.groupindex else ""
                raise OptionError(
                    f"the pattern needs a named group year, date or time{named}, "
                    "e.g. (?P<year>\\d{4})(?P<doy>\\d{3}) or (?P<date>\\d{8})",
                    option="--time-pattern",
                )

    def _check_sentinel2(self) -> None:
        """``--bands``, ``--resolution``, ``--mgrs`` (normalised to ``33UUU``) and ``--max-cloud``."""
        if self.bands is not None:
            try:
                select_bands(self.bands)
            except ValueError as err:
                raise OptionError(str(err), option="--bands") from err
        if self.resolution not in (None, 10):
            raise OptionError(f"expected 10 (every band on the 10 m grid), got {self.resolution!r}", option="--resolution")
        object.__setattr__(self, "mgrs", tuple(t.strip().upper().removeprefix("T") for t in self.mgrs if t.strip()))
        for tile in self.mgrs:
            if not re.fullmatch(r"\d{1,2}[C-X][A-Z]{2}", tile):
                raise OptionError(f"expected MGRS tiles such as 33UUU, got {tile!r}", option="--mgrs")
        if self.max_cloud is not None and not 0 <= self.max_cloud <= 100:
            raise OptionError(f"expected a cloud cover percentage from 0 to 100, got {self.max_cloud}", option="--max-cloud")

    @property
    def error_bound(self) -> ErrorBound | None:
        """The lossy bound every decoded sample honours, or None for lossless."""
        return parse_error_bound(max_abs_error=self.max_abs_error, max_rel_error=self.max_rel_error)

    @property
    def s2_request(self) -> S2Request:
        """What Sentinel-2 L2A items are converted to."""
        return S2Request(self.bands, self.resolution, self.mgrs, self.max_cloud)

    @property
    def manifest_path(self) -> str:
        """Where the run manifest is written: ``OUT/manifest.jsonl``."""
        return os.path.join(self.out, "manifest.jsonl")

    @property
    def superseded_path(self) -> str:
        """Where a run lists the earlier cubes its own supersede and that it kept (without ``--prune``):
        ``OUT/superseded.jsonl``, so that a later ``--prune`` finds them (:mod:`pipelines.stale`)."""
        return os.path.join(self.out, "superseded.jsonl")

    @property
    def unlisted_path(self) -> str:
        """Where a run lists the earlier cubes left in ``OUT`` that no manifest or catalogue lists any more:
        ``OUT/unlisted.jsonl``, so that every later run names them, and supersedes them once it holds their inputs
        (:mod:`pipelines.stale`)."""
        return os.path.join(self.out, "unlisted.jsonl")

    @property
    def settling_path(self) -> str:
        """Where a run keeps the cubes it may supersede or leave unlisted until it has settled them:
        ``OUT/.settling.jsonl``. It replaces the manifest they come from first, so a run killed in between
        would forget them (:mod:`pipelines.stale`)."""
        return os.path.join(self.out, ".settling.jsonl")

    @property
    def catalog_dir(self) -> str:
        """Where the STAC catalogue is written: ``--catalog``, by default ``OUT/stac``."""
        return os.fspath(self.catalog) if self.catalog else os.path.join(self.out, "stac")

    @property
    def dead_letter_path(self) -> str:
        """Where rejected inputs are listed: ``OUT/dead-letter.jsonl``."""
        return os.path.join(self.out, "dead-letter.jsonl")

    @property
    def parts_dir(self) -> str:
        """Where workers leave compressed frames until a file is assembled.

        ``OUT/.parts`` on a filesystem; in a bucket, this run's temporary
        objects ``OUT/.rumi-tmp/<run_id>``.
        """
        if self.out.startswith("gs://"):
            return f"{self.out}/.rumi-tmp/{self.run_id}"
        return os.path.join(self.out, ".parts")

    @property
    def statuses_path(self) -> str:
        """Where the run records which cubes it wrote and which it skipped, for its summary: in its work folder.

        Not in the manifest, which describes the outputs alone, so that a
        re-run and a clean run write the same manifest.
        """
        if self.out.startswith("gs://"):
            return f"{self.parts_dir}/statuses.jsonl"
        return os.path.join(self.staging_dir, "statuses.jsonl")

    @property
    def published_dir(self) -> str:
        """Where each cube published into a local ``--out`` is recorded (its manifest line) until the run's manifest
        lists it: ``OUT/.published``. A run killed before its manifest leaves them, so the next one skips those cubes;
        a bucket keeps that record in each file's object metadata instead."""
        return os.path.join(self.out, ".published")

    @property
    def staging_dir(self) -> str:
        """Where files are assembled and verified before publishing: ``OUT/.staging``."""
        return os.path.join(self.out, ".staging")
