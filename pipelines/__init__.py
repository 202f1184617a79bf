"""pipelines: the Apache Beam conversion pipeline of rumi-forge (``rumi convert``).

Turns archives of GeoTIFF scenes into grid-aligned rumi cubes: discover
scenes, read their metadata, group them into cubes, split the cubes into
frames read through windows, compress the frames in parallel, assemble and
verify each file, build its header blob, and write the run manifest.
Runs unchanged on the FnApiRunner (in memory or multi-processing), the
portable runner and the Dask runner.

Imports flow one way: this package uses :mod:`rumi_core`, never the reverse.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipelines.assembly import AssembleFiles as AssembleFiles
    from pipelines.assembly import PrepareParts as PrepareParts
    from pipelines.assembly import SkipExisting as SkipExisting
    from pipelines.assembly import WriteParts as WriteParts
    from pipelines.compression import ChooseCodecs as ChooseCodecs
    from pipelines.compression import CompressFrames as CompressFrames
    from pipelines.convert import Convert as Convert
    from pipelines.convert import main as main
    from pipelines.convert import run as run
    from pipelines.cubes import PlanCubes as PlanCubes
    from pipelines.deadletter import DeadLetter as DeadLetter
    from pipelines.discovery import DiscoverScenes as DiscoverScenes
    from pipelines.errors import AssemblyError as AssemblyError
    from pipelines.errors import OptionError as OptionError
    from pipelines.errors import PipelineError as PipelineError
    from pipelines.errors import SceneError as SceneError
    from pipelines.errors import VerificationError as VerificationError
    from pipelines.frames import ReadFrames as ReadFrames
    from pipelines.frames import SplitFrames as SplitFrames
    from pipelines.grouping import plan_cubes as plan_cubes
    from pipelines.keys import FrameKey as FrameKey
    from pipelines.manifest import ManifestEntry as ManifestEntry
    from pipelines.metadata import ReadSceneMetadata as ReadSceneMetadata
    from pipelines.options import ConvertOptions as ConvertOptions
    from pipelines.plan import CubePlan as CubePlan
    from pipelines.scene import Scene as Scene
    from pipelines.scene import SceneRef as SceneRef
    from pipelines.selection import choose_codec as choose_codec
    from pipelines.selection import choose_frame_unit as choose_frame_unit
    from pipelines.sinks import WriteDeadLetters as WriteDeadLetters
    from pipelines.sinks import WriteManifest as WriteManifest
    from pipelines.summary import Summary as Summary

# Names load on first use (PEP 562), so that listing the ``rumi`` commands or
# reading ``rumi convert --help`` does not import Apache Beam.
_LAZY: dict[str, str] = {
    "AssembleFiles": "pipelines.assembly",
    "PrepareParts": "pipelines.assembly",
    "SkipExisting": "pipelines.assembly",
    "WriteParts": "pipelines.assembly",
    "ChooseCodecs": "pipelines.compression",
    "CompressFrames": "pipelines.compression",
    "Convert": "pipelines.convert",
    "main": "pipelines.convert",
    "run": "pipelines.convert",
    "PlanCubes": "pipelines.cubes",
    "DeadLetter": "pipelines.deadletter",
    "DiscoverScenes": "pipelines.discovery",
    "AssemblyError": "pipelines.errors",
    "OptionError": "pipelines.errors",
    "PipelineError": "pipelines.errors",
    "SceneError": "pipelines.errors",
    "VerificationError": "pipelines.errors",
    "ReadFrames": "pipelines.frames",
    "SplitFrames": "pipelines.frames",
    "plan_cubes": "pipelines.grouping",
    "FrameKey": "pipelines.keys",
    "ManifestEntry": "pipelines.manifest",
    "ReadSceneMetadata": "pipelines.metadata",
    "ConvertOptions": "pipelines.options",
    "CubePlan": "pipelines.plan",
    "Scene": "pipelines.scene",
    "SceneRef": "pipelines.scene",
    "choose_codec": "pipelines.selection",
    "choose_frame_unit": "pipelines.selection",
    "WriteDeadLetters": "pipelines.sinks",
    "WriteManifest": "pipelines.sinks",
    "Summary": "pipelines.summary",
}


class _NoApitoolsWarning(logging.Filter):
    """Drop the warning Beam's BigQuery module logs on import when apitools is absent.

    ``apache_beam.io.gcp`` logs "apitools not found..." on the root logger
    at import time, although no BigQuery source is used here; it reached
    every ``rumi`` command. Only that one message is dropped.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("apitools not found")


logging.getLogger().addFilter(_NoApitoolsWarning())

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "AssembleFiles",
    "AssemblyError",
    "ChooseCodecs",
    "CompressFrames",
    "Convert",
    "ConvertOptions",
    "CubePlan",
    "DeadLetter",
    "DiscoverScenes",
    "FrameKey",
    "ManifestEntry",
    "OptionError",
    "PipelineError",
    "PlanCubes",
    "PrepareParts",
    "ReadFrames",
    "ReadSceneMetadata",
    "Scene",
    "SceneError",
    "SceneRef",
    "SkipExisting",
    "SplitFrames",
    "Summary",
    "VerificationError",
    "WriteDeadLetters",
    "WriteManifest",
    "WriteParts",
    "choose_codec",
    "choose_frame_unit",
    "main",
    "plan_cubes",
    "run",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pipelines' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
