"""An input is the file its href names: a link to it, or a URL signed at another time, is the same input.

The cube's name hashes its inputs (pipelines.planning.plan.inputs_hash), and
planning counts each file once (pipelines.planning.grouping.plan_cubes), so
the same files give the same outputs however they are reached.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from typing import TYPE_CHECKING

from catalog.credentials import unsigned
from catalog.testing import RangeRequestServer
from pipelines.convert import run
from pipelines.jsonl import load_jsonl
from pipelines.options import ConvertOptions
from pipelines.planning.hrefs import input_identity, one_href_per_file
from pipelines.testing import garble_first_block, write_series

if TYPE_CHECKING:
    from pathlib import Path


def _outputs(out: Path) -> dict[str, str]:
    """SHA-256 of every cube, blob and the manifest, by name."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.iterdir())
        if p.suffix in (".rumi", ".rumih") or p.name == "manifest.jsonl"
    }


def test_a_folder_and_a_link_to_it_are_one_input(tmp_path: Path) -> None:
    """Through the link alone, the same cube; the folder and the link in one run, the same cube again, not duplicates. The
    manifest too: it recorded the inputs as given, so a run through the link (or a re-run through it, which skipped every
    cube) wrote other bytes."""
    real = tmp_path / "archive"
    write_series(str(real), dates=["2023-01-05", "2023-02-04"], size=(48, 64), seed=3)
    (tmp_path / "latest").symlink_to(real)
    options = {"tile_size": 32, "frame_unit": 0, "compression": "raster", "write_catalog": False}
    outputs = {}
    for name, inputs in (("real", [real]), ("link", [tmp_path / "latest"]), ("both", [real, tmp_path / "latest" / "*.tif"])):
        summary = run([str(p) for p in inputs], ConvertOptions(out=str(tmp_path / name), **options))  # type: ignore[arg-type]
        assert summary.dead_letters == () and [e.status for e in summary.entries] == ["written"], name
        outputs[name] = _outputs(tmp_path / name)
    assert outputs["real"] == outputs["link"] == outputs["both"]
    (entry,) = load_jsonl(str(tmp_path / "link" / "manifest.jsonl"))
    assert all(os.path.dirname(h) == str(real.resolve()) for h in entry["inputs"])  # the files' own paths, links resolved


def test_a_signed_urls_signature_names_nothing(tmp_path: Path) -> None:
    """URLs signed at two times give one cube name, and the manifest keeps no signature (a credential)."""
    paths, _ = write_series(str(tmp_path / "served"), dates=["2023-01-05", "2023-02-04"], size=(48, 64), seed=5)
    signatures = (
        "X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Date=20240101T000000Z&X-Goog-Expires=900&X-Goog-Signature=aa&generation=7",
        "X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Date=20240102T001500Z&X-Goog-Expires=900&X-Goog-Signature=bb&generation=7",
    )
    names = []
    with RangeRequestServer(tmp_path / "served") as server:
        for i, query in enumerate(signatures):
            urls = [f"{server.url(os.path.basename(p))}?{query}" for p in paths]
            out = tmp_path / f"signed{i}"
            options = ConvertOptions(out=str(out), tile_size=32, frame_unit=0, compression="raster", write_catalog=False)
            summary = run(urls, options)
            assert summary.dead_letters == () and len(summary.entries) == 1
            (entry,) = load_jsonl(str(out / "manifest.jsonl"))
            assert sorted(entry["inputs"]) == sorted(f"{server.url(os.path.basename(p))}?generation=7" for p in paths)
            names.append(entry["cube_id"])
    assert names[0] == names[1]


def test_identity_and_unsigned() -> None:
    s3 = "https://b.s3.amazonaws.com/a.tif?X-Amz-Credential=k&X-Amz-Signature=s&versionId=3"
    assert unsigned(s3) == "https://b.s3.amazonaws.com/a.tif?versionId=3"
    assert unsigned("https://h/a.tif?Expires=1&Signature=s&Key-Pair-Id=k") == "https://h/a.tif"
    assert unsigned("https://h/a.tif") == "https://h/a.tif"
    assert input_identity("gs://b/a.tif") == "gs://b/a.tif"


def test_a_question_mark_in_an_object_name_is_the_names_own() -> None:
    """A ``gs://`` object, like a local file, has no query: two objects told apart after a ``?`` stay two inputs."""
    named = ["gs://b/a.tif?X-Goog-Signature=1&v=1", "gs://b/a.tif?X-Goog-Signature=2&v=1"]
    assert [unsigned(href) for href in named] == named
    assert len(one_href_per_file(named)) == 2


def test_a_signing_schemes_common_names_go_only_beside_the_parameter_that_marks_it() -> None:
    """``st``, ``sig`` or ``Expires`` may name a file's version on another host: two such URLs stay two inputs."""
    assert len(one_href_per_file(["https://h/a.tif?st=v1", "https://h/a.tif?st=v2"])) == 2
    assert unsigned("https://h/a.tif?Expires=1&Signature=2") == "https://h/a.tif?Expires=1&Signature=2"
    sas = "https://acct.blob.core.windows.net/c/a.tif?sv=2021-06-08&st=1&se=2&sp=r&sr=b&sig=x%2By&snapshot=4"
    assert unsigned(sas) == "https://acct.blob.core.windows.net/c/a.tif?snapshot=4"
    assert (
        unsigned("https://storage.googleapis.com/b/a.tif?GoogleAccessId=k&Expires=1&Signature=s")
        == "https://storage.googleapis.com/b/a.tif"
    )
    assert (
        unsigned("https://b.s3.amazonaws.com/a.tif?AWSAccessKeyId=k&Expires=1&Signature=s&versionId=3")
        == "https://b.s3.amazonaws.com/a.tif?versionId=3"
    )


def test_an_unsigned_query_is_kept_as_written() -> None:
    """The manifest records the URL that was read: the query's text is not parsed and re-encoded."""
    assert unsigned("https://h/a.tif?a=1;b=2&token&c=%ZZ") == "https://h/a.tif?a=1;b=2&token&c=%ZZ"
    assert unsigned("https://h/a.tif?token&X-Goog-Signature=s&c=%2F") == "https://h/a.tif?token&c=%2F"


def test_an_archive_in_a_folder_and_through_a_link_to_it_is_one_input(tmp_path: Path) -> None:
    """A member's identity resolves its archive's links, as a file's does: the folder and the link give one cube."""
    paths, _ = write_series(str(tmp_path / "gen"), dates=["2023-01-05", "2023-02-04"], bands=["B04"], size=(48, 64), seed=3)
    (tmp_path / "real").mkdir()
    with zipfile.ZipFile(tmp_path / "real" / "S2_T32UPU_series.zip", "w") as archive:
        for p in paths:
            archive.write(p, os.path.basename(p))
    (tmp_path / "latest").symlink_to(tmp_path / "real")
    member = os.path.basename(paths[0])
    real, link = (f"/vsizip/{{{tmp_path / d / 'S2_T32UPU_series.zip'}}}/{member}" for d in ("real", "latest"))
    assert input_identity(real) == input_identity(link) == real
    options = ConvertOptions(out=str(tmp_path / "out"), tile_size=32, frame_unit=0, compression="raster", write_catalog=False)
    summary = run([str(tmp_path / "real"), str(tmp_path / "latest")], options)
    assert summary.dead_letters == () and [e.status for e in summary.entries] == ["written"]


def test_no_signature_is_written_where_an_input_failed_or_was_dropped(tmp_path: Path) -> None:
    """Dead letters and a manifest's ``dropped`` hold unsigned URLs, as its ``inputs`` do; a scene whose pixels fail to
    read over a signed URL is still left out on the second pass, which names it by its dead letter's unsigned href."""
    served = tmp_path / "served"
    paths, _ = write_series(str(served), dates=["2024-04-02", "2024-04-07"], size=512, bands=("B04", "B08"), seed=6)
    write_series(str(served), dates=["2024-04-02"], size=512, bands=("B04", "B08"), seed=7, prefix="S2_T32UPV")
    broken = sorted(p for p in paths if "20240407" in p)[0]
    garble_first_block(broken)
    query = "X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=k&X-Goog-Signature=secret"
    with RangeRequestServer(served) as server:
        urls = [f"{server.url(name)}?{query}" for name in sorted(os.listdir(served))]
        out = tmp_path / "out"
        options = ConvertOptions(out=str(out), tile_size=256, duplicates="first", write_catalog=False)
        summary = run(urls, options)
    assert [(e.shape[0], e.status) for e in summary.entries] == [(1, "written")]
    assert {d.reason for d in summary.dead_letters} == {"read-failed", "incomplete-scene"}
    for name in ("manifest.jsonl", "dead-letter.jsonl"):
        assert "secret" not in (out / name).read_text(), name
    (entry,) = load_jsonl(str(out / "manifest.jsonl"))
    assert len(entry["dropped"]) == 2 and all(href.startswith(server.url("S2_T32UPV")) for href in entry["dropped"])
    (failed,) = (d for d in summary.dead_letters if d.reason == "read-failed")
    assert failed.href == server.url(os.path.basename(broken))
