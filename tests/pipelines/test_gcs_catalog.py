"""The STAC catalogue of a ``gs://`` conversion, in a bucket, on gcp-storage-emulator started here.

Items are built from the files in the bucket with ranged reads (no cube is
downloaded), uploaded leaves first and the root last, validated offline,
searched with ``rumi search gs://…`` and read through with ``rumi read
gs://…/item.json``; the pixels must equal the generated sources.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from click.testing import CliRunner

from catalog.errors import ItemError
from catalog.items import create_item
from catalog.search import search
from catalog.storage import join_href
from catalog.validation import validate_stac
from pipelines.bucket import GCSOutput, output_store
from pipelines.convert import run
from pipelines.crc32c import crc32c_of
from pipelines.options import ConvertOptions
from pipelines.testing import write_series
from pipelines.transforms.publish import write_catalog
from rumi_core.cli.main import cli

if TYPE_CHECKING:
    from catalog.testing import GCSEmulator

BUCKET = "rumi"
"""The bucket of the ``emulator`` fixture (tests/pipelines/conftest.py)."""
OTHER_BUCKET = "stacs"
DATES = ["2023-03-01", "2023-03-11"]
STAC_SCHEMAS = Path(os.environ.get("RUMI_STAC_SCHEMAS", Path(__file__).resolve().parents[3] / "shared" / "stac-schemas"))
"""Extension schemas for offline validation, as in tests/conftest.py; without them the core and rumi: schemas are checked."""


@pytest.fixture(scope="module")
def emulator(emulator: GCSEmulator) -> GCSEmulator:
    """The pipeline tests' emulator, with :data:`OTHER_BUCKET` too."""
    output_store().client.create_bucket(OTHER_BUCKET)
    return emulator


def _objects(bucket: str, prefix: str) -> dict[str, bytes]:
    """Every object under ``gs://<bucket>/<prefix>/`` by relative name."""
    client = output_store().client
    return {b.name[len(prefix) + 1 :]: b.download_as_bytes() for b in client.list_blobs(bucket, prefix=prefix + "/")}


def _check_catalogue(bucket: str, prefix: str) -> dict[str, Any]:
    """Validate every STAC document under the prefix; return the one item (there is one cube)."""
    objects = _objects(bucket, prefix)
    assert "catalog.json" in objects and "items.parquet" in objects
    assert [n for n in objects if n.startswith("thumbnails/") and objects[n].startswith(b"\x89PNG")]
    items = []
    for name, data in objects.items():
        if name.endswith(".json"):
            doc = json.loads(data)
            report = validate_stac(doc, schema_dir=str(STAC_SCHEMAS) if STAC_SCHEMAS.is_dir() else None)
            assert report.checked
            if doc["type"] == "Feature":
                items.append(doc)
    (item,) = items
    return item


def _manifest(out: str) -> dict[str, Any]:
    bucket, _, prefix = out[5:].partition("/")
    (entry,) = [json.loads(line) for line in _objects(bucket, prefix)["manifest.jsonl"].decode().splitlines()]
    return entry


def _read_through_item(catalogue: str, tmp_path: Path, cube: np.ndarray[Any, Any], bbox: list[float]) -> None:
    """``rumi search`` finds the cube by its bbox; ``rumi read ITEM`` returns the source pixels of a window."""
    runner = CliRunner()
    found = runner.invoke(cli, ["search", catalogue, "--bbox", ",".join(map(str, bbox)), "--json"])
    assert found.exit_code == 0, found.output
    (hit,) = search(catalogue, bbox=bbox)
    assert hit.id in found.output and hit.item_href is not None and hit.item_href.startswith("gs://")
    assert search(catalogue, bbox=(-10.0, -10.0, -9.0, -9.0)) == []
    out = tmp_path / "window.npy"
    result = runner.invoke(cli, ["read", hit.item_href, "--bands", "2,0", "--window", "3:29,5:40", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert np.array_equal(np.load(out), cube[:, [2, 0], 3:29, 5:40])


def test_local_to_bucket_catalogue_default_and_rerun(emulator: GCSEmulator, tmp_path: Path) -> None:
    """Local scenes, ``--out gs://…``: the catalogue lands in OUT/stac with relative hrefs; a re-run
    after a killed publish ends byte-identical to the clean run and removes the leftovers."""
    paths, cube = write_series(str(tmp_path / "scenes"), dates=DATES, size=(40, 48), seed=7)
    out = f"gs://{BUCKET}/local-in/run1"
    # A fixed codec, so the re-run's bytes cannot depend on a measured choice.
    options = ConvertOptions(out=out, tile_size=32, compression="raster")
    run(sorted(paths), options)
    item = _check_catalogue(BUCKET, "local-in/run1/stac")
    entry = _manifest(out)
    data = item["assets"]["data"]
    # Relative to the item (stac/<collection>/<item>/), so the tree moves with its files.
    assert data["href"] == f"../../../{entry['file']}"
    assert "file:checksum" not in data and data["rumi:crc32c"] == entry["extra"]["crc32c"]
    rumi_bytes = _objects(BUCKET, "local-in/run1")[entry["file"]]
    assert int(data["rumi:crc32c"], 16) == crc32c_of(rumi_bytes) and data["file:size"] == len(rumi_bytes)
    blob = _objects(BUCKET, "local-in/run1")[entry["blob"]]
    assert item["assets"]["header"]["file:checksum"] == item["properties"]["rumi:header_checksum"]
    assert item["properties"]["rumi:header_checksum"] == "1220" + hashlib.sha256(blob).hexdigest()
    _read_through_item(f"{out}/stac", tmp_path, cube, item["bbox"])

    clean = {n: hashlib.sha256(v).hexdigest() for n, v in _objects(BUCKET, "local-in/run1/stac").items()}
    # What a publish killed before its root leaves: an item and a thumbnail of a cube that is gone.
    bucket = output_store().client.bucket(BUCKET)
    bucket.blob("local-in/run1/stac/rumi-32632-deadbeef/gone/gone.json").upload_from_string(b"{}")
    bucket.blob("local-in/run1/stac/thumbnails/gone.png").upload_from_string(b"png")
    summary = run(sorted(paths), options)
    assert [e.status for e in summary.entries] == ["skipped"]
    again = {n: hashlib.sha256(v).hexdigest() for n, v in _objects(BUCKET, "local-in/run1/stac").items()}
    assert again == clean


def test_bucket_to_bucket_catalogue_in_another_bucket(emulator: GCSEmulator, tmp_path: Path) -> None:
    """gs:// scenes through ``rumi convert`` with ``--catalog`` in another bucket: absolute hrefs, same reads."""
    paths, cube = write_series(str(tmp_path / "scenes"), dates=DATES, size=(40, 48), seed=8)
    bucket = output_store().client.bucket(BUCKET)
    for path in paths:
        bucket.blob(f"archive/scenes/{path.rsplit('/', 1)[-1]}").upload_from_filename(path)
    out = f"gs://{BUCKET}/gs-in/run1"
    catalogue = f"gs://{OTHER_BUCKET}/stac"
    args = ["convert", f"gs://{BUCKET}/archive/scenes/*.tif", "--out", out, "--catalog", catalogue, "--tile-size", "32"]
    result = CliRunner().invoke(cli, [*args, "--compression", "raster", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert f"catalogue: {catalogue}" in result.output
    item = _check_catalogue(OTHER_BUCKET, "stac")
    entry = _manifest(out)
    assert item["assets"]["data"]["href"] == f"{out}/{entry['file']}"
    assert item["assets"]["header"]["href"] == f"{out}/{entry['blob']}"
    thumb = item["assets"]["thumbnail"]["href"]
    assert not thumb.startswith("gs://")
    hit = search(catalogue)[0]
    assert hit.item_href is not None
    assert join_href(hit.item_href, thumb).startswith(f"gs://{OTHER_BUCKET}/stac/thumbnails/")
    _read_through_item(catalogue, tmp_path, cube, item["bbox"])


def test_create_item_on_a_bucket_object(emulator: GCSEmulator, cube_file: tuple[Path, bytes, Any], tmp_path: Path) -> None:
    """Without a manifest, the item records the CRC32C that GCS reports and no SHA-256 it would have to download for."""
    path, blob, _ = cube_file
    data = path.read_bytes()
    bucket = output_store().client.bucket(BUCKET)
    bucket.blob("items/cube.rumi").upload_from_string(data)
    bucket.blob("items/cube.rumih").upload_from_string(blob)
    url = f"gs://{BUCKET}/items/cube.rumi"
    with pytest.raises(ItemError, match="thumbnail_path"):
        create_item(url, url + "h")
    item = create_item(url, url + "h", thumbnail_path=tmp_path / "cube.png").to_dict()
    assert item["id"] == "cube"
    asset = item["assets"]["data"]
    assert (asset["href"], asset["file:size"], asset["rumi:crc32c"]) == (url, len(data), f"{crc32c_of(data):08x}")
    assert "file:checksum" not in asset
    assert item["assets"]["header"]["file:checksum"] == "1220" + hashlib.sha256(blob).hexdigest()
    assert item["assets"]["thumbnail"]["href"] == str(tmp_path / "cube.png")
    assert (tmp_path / "cube.png").read_bytes().startswith(b"\x89PNG")
    validate_stac(item)


def test_publish_writes_the_root_last_and_a_failed_publish_converges(
    emulator: GCSEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upload order is items and thumbnails, collections, index, root; a publish that dies before its
    root (the upload of catalog.json fails, as a killed process would never send it) leaves no root, and the
    next publish ends byte-identical to a clean one. The emulator stores every object; only the order is observed."""
    paths, _ = write_series(str(tmp_path / "scenes"), dates=DATES, size=(40, 48), seed=9)
    out = f"gs://{BUCKET}/order/run1"
    summary = run(sorted(paths), ConvertOptions(out=out, tile_size=32, compression="raster", write_catalog=False))
    written: list[str] = []
    dies_at_root = [False]
    real_write = GCSOutput.write

    def spy(self: GCSOutput, url: str, data: bytes, *, if_generation: int | None = None) -> bool:
        if dies_at_root[0] and url.endswith("/catalog.json"):
            dies_at_root[0] = False
            raise ConnectionError("the publishing process died")
        written.append(url)
        return real_write(self, url, data, if_generation=if_generation)

    monkeypatch.setattr(GCSOutput, "write", spy)
    write_catalog(summary.entries, out=out, root=f"{out}/stac-b")
    assert [w.rsplit("/", 1)[-1] for w in written[-3:]] == ["collection.json", "items.parquet", "catalog.json"]
    assert all(w.endswith((".png", ".json")) for w in written[:-3]) and not any("collection.json" in w for w in written[:-3])
    clean = {n: hashlib.sha256(v).hexdigest() for n, v in _objects(BUCKET, "order/run1/stac-b").items()}

    dies_at_root[0] = True
    with pytest.raises(ConnectionError):
        write_catalog(summary.entries, out=out, root=f"{out}/stac-a")
    left = _objects(BUCKET, "order/run1/stac-a")
    assert "catalog.json" not in left and "items.parquet" in left
    write_catalog(summary.entries, out=out, root=f"{out}/stac-a")
    assert {n: hashlib.sha256(v).hexdigest() for n, v in _objects(BUCKET, "order/run1/stac-a").items()} == clean


def test_runs_into_one_bucket_catalogue_add_to_it(emulator: GCSEmulator, tmp_path: Path) -> None:
    """Two runs with their own ``--out`` and one ``--catalog gs://…``: the catalogue equals a clean one of both runs' cubes."""
    runs = [f"gs://{BUCKET}/shared/run{i}" for i in (1, 2)]
    first, _ = write_series(str(tmp_path / "a"), dates=DATES, size=(40, 48), seed=12)
    second, _ = write_series(str(tmp_path / "b"), dates=DATES, size=(40, 48), seed=13, origin=(700000.0, 5300040.0))
    entries = [
        run(sorted(files), ConvertOptions(out=out, tile_size=32, write_catalog=False)).entries
        for files, out in zip((first, second), runs, strict=True)
    ]
    root = f"gs://{BUCKET}/shared/stac"
    write_catalog(entries[0], out=runs[0], root=root)
    write_catalog(entries[1], out=runs[1], root=root)
    hits = search(root)
    assert sorted(h.id for h in hits) == sorted(e.cube_id for es in entries for e in es)
    assert {h.data_href.rsplit("/", 2)[1] for h in hits if h.data_href} == {"run1", "run2"}
    assert len([n for n in _objects(BUCKET, "shared/stac") if n.startswith("thumbnails/")]) == 2


def test_incremental_publish_keeps_earlier_items_in_a_bucket(emulator: GCSEmulator, tmp_path: Path) -> None:
    """``carry_over`` (``--stac-api`` runs) keeps the items of the bucket catalogue that a run did not produce,
    with their thumbnails: the result equals a clean catalogue of both runs' cubes."""
    out = f"gs://{BUCKET}/incremental/run"
    options = ConvertOptions(out=out, tile_size=32, compression="raster", write_catalog=False)
    first, _ = write_series(str(tmp_path / "a"), dates=DATES, size=(40, 48), seed=10)
    second, _ = write_series(str(tmp_path / "b"), dates=DATES, size=(40, 48), seed=11, origin=(700000.0, 5300040.0))
    entries_a = run(sorted(first), options).entries
    entries_b = run(sorted(second), options).entries
    write_catalog(entries_a, out=out, root=f"{out}/stac-inc")
    write_catalog(entries_b, out=out, root=f"{out}/stac-inc", carry_over=True)
    write_catalog([*entries_a, *entries_b], out=out, root=f"{out}/stac-all")
    incremental = {n: hashlib.sha256(v).hexdigest() for n, v in _objects(BUCKET, "incremental/run/stac-inc").items()}
    assert len([n for n in incremental if n.startswith("thumbnails/")]) == 2
    assert incremental == {n: hashlib.sha256(v).hexdigest() for n, v in _objects(BUCKET, "incremental/run/stac-all").items()}
    assert len(search(f"{out}/stac-inc")) == 2
