"""Collecting a PCollection and counting what flows (pipelines.transforms.collect)."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.util import assert_that, equal_to

from pipelines.transforms.collect import Collect, inc


def _counted(item: int) -> int:
    inc("Counted", "items")
    inc("Counted", "sum", item)
    return item


def _run(items: list[int]) -> dict[str, int]:
    p = beam.Pipeline(runner="FnApiRunner")
    collected = p | beam.Create(items) | beam.Map(_counted) | Collect() | beam.Map(sorted)
    assert_that(collected, equal_to([sorted(items)]))
    result = p.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter().with_namespace("Counted"))["counters"]
    return {c.key.metric.name: c.committed for c in counters}


def test_counters_count_each_run_on_its_own() -> None:
    """Counters are made once per name and reused; each run still reports only its own counts."""
    assert _run([1, 2, 3]) == {"items": 3, "sum": 6}
    assert _run([10, 20]) == {"items": 2, "sum": 30}


def test_collect_gives_one_list_even_for_no_elements() -> None:
    assert _run([]) == {}
