"""The local runner on worker threads sends each element whole (pipelines.threaded_runner)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import apache_beam as beam
from apache_beam.coders import Coder
from apache_beam.coders.typecoders import registry
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from pipelines.threaded_runner import ThreadedRunner

if TYPE_CHECKING:
    from pathlib import Path


class _Slow:
    """A value whose coder is slower than Beam's one-second flush timer."""

    def __init__(self, value: int) -> None:
        self.value = value


class _SlowCoder(Coder):
    def encode(self, value: _Slow) -> bytes:
        time.sleep(1.2)  # the embedded worker's timer (1 s) fires while the element is half written
        return value.value.to_bytes(4, "little")

    def decode(self, encoded: bytes) -> _Slow:
        return _Slow(int.from_bytes(encoded, "little"))

    def is_deterministic(self) -> bool:
        return True


registry.register_coder(_Slow, _SlowCoder)


def test_elements_slower_to_encode_than_the_flush_timer_group_whole() -> None:
    """On Beam's own threaded workers this pipeline grouped four wrong values out of two, without an error."""
    options = PipelineOptions(["--direct_running_mode=multi_threading", "--direct_num_workers=2"])
    with beam.Pipeline(runner=ThreadedRunner(), options=options) as p:
        groups = (
            p
            | beam.Create([1, 2, 3])
            | beam.Map(lambda i: (i % 2, _Slow(i))).with_output_types(tuple[int, _Slow])
            | beam.GroupByKey()
            | beam.MapTuple(lambda key, values: (key, sorted(v.value for v in values)))
        )
        assert_that(groups, equal_to([(0, [2]), (1, [1, 3])]))
    assert options.view_as(DirectOptions).direct_running_mode == "multi_threading"  # as given, after the run


def test_rumi_convert_runs_local_threads_on_the_threaded_runner(tmp_path: Path) -> None:
    from pipelines.convert import _build
    from pipelines.options import ConvertOptions

    out = ConvertOptions(out=str(tmp_path / "out"))
    threads = _build(["x.tif"], out, [], None, None)
    assert isinstance(threads.runner, ThreadedRunner)
    named = _build(["x.tif"], out, ["--direct_num_workers=3"], "DirectRunner", None)
    assert isinstance(named.runner, ThreadedRunner)
    processes = _build(["x.tif"], out, ["--direct_running_mode=multi_processing"], None, None)
    assert not isinstance(processes.runner, ThreadedRunner)
