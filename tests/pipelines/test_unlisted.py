"""Cubes of earlier runs that a run given other inputs leaves unlisted (:func:`pipelines.stale.unlisted_cubes`).

A run's manifest and catalogue describe its own cubes. Converting another
area into the same ``--out`` left the first area's cube in the folder, valid
but in neither the manifest nor ``rumi search``, and said nothing; the
summary now names it, and the advice it gives works.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from click.testing import CliRunner

from catalog.search import search
from pipelines.testing import write_series
from rumi_core.cli.main import cli

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def test_a_run_given_other_inputs_names_the_earlier_cubes_it_leaves_unlisted(tmp_path: Path) -> None:
    write_series(str(tmp_path / "a"), dates=["2023-01-05"], size=(40, 56), seed=3)
    write_series(str(tmp_path / "b"), dates=["2023-01-05"], size=(40, 56), seed=4, origin=(700000.0, 5300040.0))
    out = tmp_path / "out"

    def convert(*inputs: str) -> str:
        result = CliRunner().invoke(cli, ["convert", *inputs, "--out", str(out), "--tile-size", "32", "--no-progress"])
        assert result.exit_code == 0, result.output
        return result.output

    assert "in no manifest" not in convert(str(tmp_path / "a"))
    (first,) = out.glob("*.rumi")
    second = convert(str(tmp_path / "b"))
    named = f"1 cube of earlier runs is still in the output folder but in no manifest or catalogue, since this run wrote no cube holding all their inputs ({first.name}); they are listed in {out / 'unlisted.jsonl'}"  # noqa: E501
    assert named in second, second
    assert first.exists() and len(list(search(str(out / "stac")))) == 1
    both = convert(str(tmp_path / "a"), str(tmp_path / "b"))
    assert "in no manifest" not in both and len(list(search(str(out / "stac")))) == 2, both
    assert not (out / "unlisted.jsonl").exists()


def test_a_run_of_another_area_keeps_the_earlier_superseded_list(tmp_path: Path) -> None:
    """A superseded cube kept without --prune stays in OUT/superseded.jsonl through a run of another area, which
    supersedes nothing (the list was deleted, the cube named as merely unlisted, and never pruned)."""
    import os

    from pipelines.jsonl import load_jsonl

    scenes = tmp_path / "a"
    paths, _ = write_series(str(scenes), dates=["2023-01-05", "2023-02-04", "2023-03-06"], size=(40, 56), seed=6)
    for path in paths:
        if "20230306" in path:
            os.rename(path, tmp_path / os.path.basename(path))
    write_series(str(tmp_path / "b"), dates=["2023-01-05"], size=(40, 56), seed=4, origin=(700000.0, 5300040.0))
    out = tmp_path / "out"

    def convert(source: Path, *more: str) -> str:
        result = CliRunner().invoke(cli, ["convert", str(source), "--out", str(out), "--tile-size", "32", "--no-progress", *more])
        assert result.exit_code == 0, result.output
        return result.output

    convert(scenes)
    (two_dates,) = out.glob("*.rumi")
    for path in tmp_path.glob("*.tif"):
        os.rename(path, scenes / path.name)
    assert "superseded by this run's" in convert(scenes)
    other = convert(tmp_path / "b")
    assert [line["file"] for line in load_jsonl(str(out / "superseded.jsonl"))] == [two_dates.name]
    assert two_dates.name not in other.split("in no manifest")[-1], other  # named as superseded, not unlisted
    pruned = convert(scenes, "--prune")
    assert f"pruned 1 cube of earlier runs that this run's supersede: {two_dates.name}" in pruned and not two_dates.exists()
    assert not (out / "superseded.jsonl").exists()


def test_a_cube_whose_scene_a_later_run_replaced_at_its_time_is_superseded(tmp_path: Path) -> None:
    """A scene at a time another run's cube holds another of (``--duplicates last``) was dropped: the earlier cube, which held
    it, was named as unlisted, never superseded, so --prune never removed it."""
    write_series(str(tmp_path / "a"), dates=["2023-01-05", "2023-02-04"], size=(40, 56), seed=3)
    write_series(str(tmp_path / "b"), dates=["2023-01-05"], size=(40, 56), seed=4)
    out = tmp_path / "out"

    def convert(*args: str) -> str:
        result = CliRunner().invoke(
            cli, ["convert", *args, "--out", str(out), "--tile-size", "32", "--no-progress", "--duplicates", "last"]
        )
        assert result.exit_code == 0, result.output
        return result.output

    convert(str(tmp_path / "a"))
    (first,) = out.glob("*.rumi")
    second = convert(str(tmp_path / "a"), str(tmp_path / "b"), "--prune")
    assert f"pruned 1 cube of earlier runs that this run's supersede: {first.name}" in second, second
    assert not first.exists() and len(list(out.glob("*.rumi"))) == 1


def test_a_cube_left_unheld_by_tonights_dead_letters_is_named_with_them(tmp_path: Path) -> None:
    """A scene arriving at a time already converted leaves that time step out (duplicate-time): the earlier cube, which
    held it, is unlisted, and the summary points at the dead letters rather than only at how the inputs were given."""
    write_series(str(tmp_path / "a"), dates=["2023-01-05", "2023-02-04"], size=(40, 56), seed=3)
    write_series(str(tmp_path / "b"), dates=["2023-01-05"], size=(40, 56), seed=4)
    out = tmp_path / "out"
    args = ["--out", str(out), "--tile-size", "32", "--no-progress"]
    assert CliRunner().invoke(cli, ["convert", str(tmp_path / "a"), *args]).exit_code == 0
    result = CliRunner().invoke(cli, ["convert", str(tmp_path / "a"), str(tmp_path / "b"), *args])
    assert result.exit_code == 0, result.output
    assert "holding all their inputs (" in result.output and "; 4 inputs of theirs are dead letters of this run (" in result.output
    assert "left out: 1 time step in no cube (2023-01-05T10:30:21Z on EPSG32632_r10)" in result.output, result.output


def test_a_cube_whose_scene_left_the_archive_is_named_on_every_run_until_its_inputs_are_held_again(tmp_path: Path) -> None:
    """A deleted scene leaves the earlier cube holding it unlisted: never pruned (it may hold the only copy), it was named
    by the next run alone, as if the inputs had been given apart, and forgotten after; 36 % of a folder's bytes, nightly."""
    import shutil

    from pipelines.jsonl import load_jsonl

    paths, _ = write_series(str(tmp_path / "a"), dates=["2023-01-05", "2023-02-04"], size=(40, 56), seed=3)
    out = tmp_path / "out"

    def convert() -> str:
        args = ["convert", str(tmp_path / "a"), "--out", str(out), "--tile-size", "32", "--no-progress", "--prune"]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        return result.output

    convert()
    (both,) = out.glob("*.rumi")
    gone = sorted(p for p in paths if "20230204" in p)
    (tmp_path / "aside").mkdir()
    for path in gone:
        shutil.move(path, tmp_path / "aside")
    for night in range(2):
        said = convert()
        assert f"({both.name}; {len(gone)} inputs of theirs no longer exist ({gone[0]}, ...)); they are listed in" in said, (night, said)
        assert both.exists() and [line["file"] for line in load_jsonl(str(out / "unlisted.jsonl"))] == [both.name]
    for path in gone:
        shutil.move(str(tmp_path / "aside" / os.path.basename(path)), path)
    back = convert()
    assert "in no manifest" not in back and not (out / "unlisted.jsonl").exists(), back
    assert [p.name for p in out.glob("*.rumi")] == [both.name]  # the one-date cube of the nights between is superseded, pruned


def test_a_run_killed_after_replacing_the_manifest_leaves_its_earlier_cubes_to_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run replaces the manifest, then settles which earlier cubes it supersedes or leaves unlisted. Killed in between,
    the earlier cubes were in no manifest or list: the next run, even with --prune, neither pruned nor named them."""
    import pipelines.convert

    scenes = tmp_path / "a"
    paths, _ = write_series(str(scenes), dates=["2023-01-05", "2023-02-04"], size=(40, 56), seed=6)
    later = [path for path in paths if "20230204" in path]
    for path in later:
        os.rename(path, tmp_path / os.path.basename(path))
    out = tmp_path / "out"
    command = ["convert", str(scenes), "--out", str(out), "--tile-size", "32", "--no-progress"]
    assert CliRunner().invoke(cli, command).exit_code == 0
    (one_date,) = out.glob("*.rumi")
    for path in later:
        os.rename(tmp_path / os.path.basename(path), path)

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # the kill, once the pass has published its cubes and manifest

    with monkeypatch.context() as patched:
        patched.setattr(pipelines.convert, "settle", killed)
        assert CliRunner().invoke(cli, command).exit_code != 0
    assert one_date.name not in (out / "manifest.jsonl").read_text()
    resumed = CliRunner().invoke(cli, [*command, "--prune"])
    assert f"pruned 1 cube of earlier runs that this run's supersede: {one_date.name}" in resumed.output, resumed.output
    assert not one_date.exists() and not (out / ".settling.jsonl").exists()
