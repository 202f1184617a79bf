"""The local runner on worker threads, whose workers send an element only whole.

``rumi convert`` runs locally on the FnApiRunner with one worker thread per
core (``--direct_running_mode=multi_threading``). In that mode Beam's
embedded gRPC worker flushes every output stream from a timer thread once a
second (``DATA_BUFFER_TIME_LIMIT_MS`` in Beam's ``worker_handlers``), while
the bundle's own thread may be halfway through encoding an element into
it: the timer does not wait for an element boundary. The runner then
decodes each flushed chunk of a GroupByKey's input on its own, so a chunk
that starts inside an element is read from the wrong byte. Measured with
Beam 2.77: a pipeline whose value coder takes longer than a second grouped
four wrong values out of two (no error raised), and a 20-date cube in
64-pixel tiles (81,920 frames) failed in 4 of 6 runs with ``Invalid
PaneInfoEncoding: 3``, and once allocated until the kernel killed it. Worker
processes (``multi_processing``), the portable runner, Dataflow and Flink
start their SDK workers without the timer.

:class:`ThreadedRunner` is the FnApiRunner on the same embedded gRPC
workers, with the timer's period set beyond any run (:data:`NEVER_MS`):
streams are then flushed only at element boundaries, by size, and when a
bundle ends. Nothing else changes, so output bytes are those of every other
runner.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions
from apache_beam.runners.portability.fn_api_runner.fn_runner import FnApiRunner
from apache_beam.transforms.environments import EmbeddedPythonGrpcEnvironment, python_sdk_capabilities

__all__ = ["NEVER_MS", "ThreadedRunner"]

NEVER_MS: Final = 2**31 - 1
"""The timed flush's period: 2**31 - 1 ms (24.8 days), beyond any run and within an int32 wherever it is read."""

_SERIAL_MODE_WARNING: Final = "If direct_num_workers is not equal to 1, direct_running_mode should be"


class _NoSerialModeWarning(logging.Filter):
    """Drop the FnApiRunner's warning that several workers want a parallel running mode.

    :meth:`ThreadedRunner.run_pipeline` runs the workers in parallel while
    the running mode reads ``in_memory`` (see there); the warning would say
    the opposite of what happens.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(_SERIAL_MODE_WARNING)


logging.getLogger("apache_beam.runners.portability.fn_api_runner.fn_runner").addFilter(_NoSerialModeWarning())


class ThreadedRunner(FnApiRunner):
    """The FnApiRunner on ``--direct_num_workers`` embedded gRPC worker threads that flush no stream on a timer."""

    def __init__(self) -> None:
        environment = EmbeddedPythonGrpcEnvironment(
            data_buffer_time_limit_ms=NEVER_MS, capabilities=python_sdk_capabilities(), artifacts=()
        )
        super().__init__(default_environment=environment)

    def run_pipeline(self, pipeline: Any, options: PipelineOptions) -> Any:
        """Run ``pipeline`` on this runner's environment, whatever ``--direct_running_mode`` says.

        The FnApiRunner replaces its environment with Beam's default (timer
        included) when the mode is ``multi_threading``; in any other mode it
        keeps the environment it was given, whose workers are threads as
        well. The mode reads ``in_memory`` for the length of the call only.
        """
        direct = options.view_as(DirectOptions)
        mode = direct.direct_running_mode
        direct.direct_running_mode = "in_memory"
        try:
            return super().run_pipeline(pipeline, options)
        finally:
            direct.direct_running_mode = mode
