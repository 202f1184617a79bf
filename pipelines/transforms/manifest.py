"""The run manifest: one JSON line per cube of a conversion.

A
:class:`ManifestEntry` records what a cube's file holds and where: file and
header blob names (relative to the output directory), shape, dtype, bands with
their metadata, times and time range, CRS, transform, nodata, tiling, frame
unit, codec, sizes, SHA-256 and inputs. :class:`WriteManifest`
writes the entries of a run as ``OUT/manifest.jsonl`` (collected in one place,
sorted by cube id so the bytes do not depend on the runner, replaced
atomically, emitting the number of lines written); the catalogue replaces
or follows that transform to turn the same entries into STAC items.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from catalog.bands import stac_nodata
from pipelines.jsonl import write_jsonl
from pipelines.planning.hrefs import input_identity
from pipelines.transforms.collect import WriteCollected, inc
from rumi_core.compression import library_versions
from rumi_core.times import format_seconds

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from pipelines.planning.plan import CubePlan

__all__ = ["ManifestEntry", "WriteManifest", "manifest_entry", "mode_extra", "recorded_inputs", "tag_extra"]


@dataclass(frozen=True)
class ManifestEntry:
    """One cube of a run."""

    cube_id: str
    """Output name without suffix."""
    status: str
    """``"written"`` by this run, or ``"skipped"`` because valid outputs already existed.

    Not a line of the manifest, which describes the outputs, so that a re-run,
    a resumed run and a clean run write the same manifest; :class:`WriteManifest`
    records it for the run's summary (:attr:`~pipelines.options.ConvertOptions.statuses_path`)."""
    file: str
    """The ``.rumi`` file, relative to the output directory."""
    blob: str
    """The ``.rumih`` header blob, relative to the output directory."""
    shape: tuple[int, ...]
    """``(T, B, Y, X)``."""
    dtype: str
    """Sample encoding name."""
    bands: tuple[dict[str, Any], ...]
    """Per band: name (the stored band text), description, scale, offset, unit."""
    times: tuple[str, ...]
    """Acquisition times, ISO 8601 UTC."""
    crs: str
    """``EPSG:n``."""
    transform: tuple[float, ...]
    """Affine transform of the first pixel's corner, rasterio order."""
    nodata: float | str | None
    """Nodata value, its STAC text (``"nan"``, ``"inf"``, ``"-inf"``), or None."""
    tile_size: int
    """Nominal tile size."""
    frame_unit: int
    """``frame_unit`` of the file."""
    codec: dict[str, Any]
    """JSON form of the codec every frame was compressed with."""
    frames: int
    """Frame count ``N``."""
    file_bytes: int
    """Size of the ``.rumi`` file."""
    blob_bytes: int
    """Size of the header blob."""
    pixel_bytes: int
    """Size of the samples, uncompressed."""
    input_bytes: int
    """Size of the input files, where known."""
    sha256: str | None
    """SHA-256 of the ``.rumi`` file, hex; None for a file composed in a bucket (``extra["crc32c"]``
    holds GCS's CRC32C instead: hashing it would mean downloading the whole cube)."""
    pixel_is_point: bool = False
    """Whether the file records PixelIsPoint."""
    inputs: tuple[str, ...] = ()
    """Input files, sorted."""
    dropped: tuple[str, ...] = ()
    """Inputs left out by ``--duplicates first|last``."""
    input_version: str = ""
    """:func:`~pipelines.planning.plan.inputs_version` of the inputs: a re-run converts the cube again when it differs
    (an input rewritten in place), where the cube's name, of the inputs' names alone, is the same."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Room for later stages: ``mode`` (``lossless`` or ``lossy``) and, for a lossy cube,
    ``lossy_bound`` (``{"max_abs_error": E}`` or ``{"max_rel_error": "P%"}``, the key the catalogue reads);
    ``compression``, the codec request (:func:`mode_extra`)."""
    libraries: dict[str, str] = field(default_factory=library_versions)
    """Versions of openzl and geozl that chose the codec and wrote the frames (the catalogue's
    ``rumi:libraries``): the bytes are a function of the data, the options and these."""

    @property
    def catalog_extra(self) -> dict[str, Any]:
        """The manifest line with :attr:`extra` lifted to the top, as :func:`catalog.create_item` reads it."""
        data = self.to_dict()
        data.update(data.pop("extra"))
        data["id"] = self.cube_id
        return data

    @property
    def time_range(self) -> tuple[str, str]:
        """First and last time."""
        return self.times[0], self.times[-1]

    def to_dict(self) -> dict[str, Any]:
        """JSON form, one line of the manifest (without :attr:`status`)."""
        data = dataclasses.asdict(self)
        del data["status"]
        for name in ("shape", "bands", "times", "transform", "inputs", "dropped"):
            data[name] = list(data[name])
        data["time_range"] = list(self.time_range)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, status: str = "written") -> ManifestEntry:
        """Inverse of :meth:`to_dict`, with the ``status`` the line does not hold."""
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        values["status"] = status
        for name in ("shape", "bands", "times", "transform", "inputs", "dropped"):
            if name in values:
                values[name] = tuple(values[name])
        return cls(**values)


def recorded_inputs(hrefs: Iterable[str]) -> tuple[str, ...]:
    """The files ``hrefs`` name, as a manifest records them: sorted :func:`~pipelines.planning.hrefs.input_identity`.

    A local path with its links resolved, as the cube's name hashes it, so that
    inputs given through a linked folder record what the folder itself does; a
    URL without its signature, a credential that changes with each signing.
    """
    return tuple(sorted({input_identity(h) for h in hrefs}))


def manifest_entry(
    plan: CubePlan, *, status: str, codec: dict[str, Any], file_bytes: int, blob_bytes: int, sha256: str | None
) -> ManifestEntry:
    """The manifest entry of a planned cube whose file exists."""
    return ManifestEntry(
        cube_id=plan.cube_id,
        status=status,
        file=f"{plan.cube_id}.rumi",
        blob=f"{plan.cube_id}.rumih",
        shape=plan.shape,
        dtype=plan.layout.encoding.name,
        bands=tuple(b.to_dict() for b in plan.bands),
        times=tuple(format_seconds(t) for t in plan.times),
        crs=f"EPSG:{plan.epsg}",
        transform=plan.transform,
        nodata=stac_nodata(plan.nodata),
        tile_size=plan.tile_size,
        frame_unit=plan.frame_unit,
        # Keys sorted at every level: a cube written now and the same cube found finished on a
        # re-run (its codec read back from the manifest's sorted JSON) give byte-identical items.
        codec=json.loads(json.dumps(codec, sort_keys=True)),
        frames=plan.layout.frame_count,
        file_bytes=file_bytes,
        blob_bytes=blob_bytes,
        pixel_bytes=plan.pixel_bytes,
        input_bytes=plan.input_bytes,
        sha256=sha256,
        pixel_is_point=plan.pixel_is_point,
        inputs=recorded_inputs(plan.inputs),
        dropped=recorded_inputs(plan.dropped),
        input_version=plan.input_version,
        extra={**mode_extra(plan), **tag_extra(plan)},
    )


def mode_extra(plan: CubePlan) -> dict[str, Any]:
    """How a cube's frames were to be encoded: ``mode`` (``lossless``, or ``lossy`` with its ``lossy_bound``)
    and ``compression``, the request (``auto``, ``max``, ``portable``, or a codec's JSON).

    A re-run keeps a finished file only when all three match its own, so the
    same command gives the same bytes whatever an earlier run into ``--out`` asked.

    >>> from types import SimpleNamespace
    >>> mode_extra(SimpleNamespace(error_bound=None, compression="auto", compression_spec=lambda: None))
    {'mode': 'lossless', 'compression': 'auto'}
    """
    bound = plan.error_bound
    spec = plan.compression_spec()
    lossy = {} if bound is None else {"lossy_bound": bound.to_dict()}
    return {"mode": "lossless" if bound is None else "lossy", **lossy, "compression": plan.compression if spec is None else spec}


def tag_extra(plan: CubePlan) -> dict[str, Any]:
    """``{"properties": {...}}`` from a plan's tags; ``{}`` without tags.

    A key named in the plural (``s2:platforms``; not ``rumi:vertical_crs``,
    whose "s" abbreviates "system") gives the list of its values, any other
    key its one value (the scenes of a cube agree on it; should they not, the
    list), so that one property has one type across items, as the
    catalogue's stac-geoparquet index needs. The catalogue copies
    ``properties`` into the cube's STAC item.
    """
    if not plan.tags:
        return {}
    plural = {k for k, _ in plan.tags if k.endswith("s") and not k.endswith("crs")}
    return {"properties": {k: list(v) if k in plural or len(v) > 1 else v[0] for k, v in plan.tags}}


@dataclass
class WriteManifest(WriteCollected):
    """Write the run manifest (usually ``OUT/manifest.jsonl``): one JSON line per cube, sorted by cube id.

    With ``statuses``, each cube's :attr:`ManifestEntry.status` goes to that
    file, the run's own record (in its work folder), not to the manifest.
    """

    statuses: str | None = None
    """Where ``{"cube_id", "status"}`` lines go; None writes none."""

    def writer(self) -> Callable[[list[ManifestEntry]], int]:
        """The manifest and the statuses."""
        return functools.partial(_write_manifest, path=self.path, temp_dir=self.temp_dir, statuses=self.statuses)


def _write_manifest(entries: list[ManifestEntry], path: str, temp_dir: str | None, statuses: str | None) -> int:
    """Sort, write, count the cubes."""
    ordered = sorted(entries, key=lambda e: e.cube_id)
    if statuses is not None:
        write_jsonl(statuses, [{"cube_id": e.cube_id, "status": e.status} for e in ordered], temp_dir=temp_dir)
    count = write_jsonl(path, [e.to_dict() for e in ordered], temp_dir=temp_dir)
    inc(WriteManifest, "cubes", count)
    return count
