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
    from pipelines.convert import Convert as Convert
    from pipelines.convert import main as main
    from pipelines.convert import run as run
    from pipelines.errors import AssemblyError as AssemblyError
    from pipelines.errors import OptionError as OptionError
    from pipelines.errors import PipelineError as PipelineError
    from pipelines.errors import SceneError as SceneError
    from pipelines.errors import VerificationError as VerificationError
    from pipelines.options import ConvertOptions as ConvertOptions
    from pipelines.planning.codec_choice import choose_codec as choose_codec
    from pipelines.planning.codec_choice import choose_frame_unit as choose_frame_unit
    from pipelines.planning.grouping import plan_cubes as plan_cubes
    from pipelines.planning.plan import CubePlan as CubePlan
    from pipelines.planning.scene import Scene as Scene
    from pipelines.planning.scene import SceneRef as SceneRef
    from pipelines.summary import Summary as Summary
    from pipelines.transforms.assemble_files import AssembleFiles as AssembleFiles
    from pipelines.transforms.assemble_files import SkipExisting as SkipExisting
    from pipelines.transforms.compress import ChooseCodecs as ChooseCodecs
    from pipelines.transforms.compress import CompressFrames as CompressFrames
    from pipelines.transforms.dead_letters import DeadLetter as DeadLetter
    from pipelines.transforms.dead_letters import WriteDeadLetters as WriteDeadLetters
    from pipelines.transforms.discover import DiscoverScenes as DiscoverScenes
    from pipelines.transforms.frames import FrameKey as FrameKey
    from pipelines.transforms.frames import ReadFrames as ReadFrames
    from pipelines.transforms.frames import SplitFrames as SplitFrames
    from pipelines.transforms.manifest import ManifestEntry as ManifestEntry
    from pipelines.transforms.manifest import WriteManifest as WriteManifest
    from pipelines.transforms.plan_cubes import PlanCubes as PlanCubes
    from pipelines.transforms.read_metadata import ReadSceneMetadata as ReadSceneMetadata
    from pipelines.transforms.write_parts import PrepareParts as PrepareParts
    from pipelines.transforms.write_parts import WriteParts as WriteParts

# Names load on first use (PEP 562), so that listing the ``rumi`` commands or
# reading ``rumi convert --help`` does not import Apache Beam.
_LAZY: dict[str, str] = {
    "AssembleFiles": "pipelines.transforms.assemble_files",
    "PrepareParts": "pipelines.transforms.write_parts",
    "SkipExisting": "pipelines.transforms.assemble_files",
    "WriteParts": "pipelines.transforms.write_parts",
    "ChooseCodecs": "pipelines.transforms.compress",
    "CompressFrames": "pipelines.transforms.compress",
    "Convert": "pipelines.convert",
    "main": "pipelines.convert",
    "run": "pipelines.convert",
    "PlanCubes": "pipelines.transforms.plan_cubes",
    "DeadLetter": "pipelines.transforms.dead_letters",
    "DiscoverScenes": "pipelines.transforms.discover",
    "AssemblyError": "pipelines.errors",
    "OptionError": "pipelines.errors",
    "PipelineError": "pipelines.errors",
    "SceneError": "pipelines.errors",
    "VerificationError": "pipelines.errors",
    "ReadFrames": "pipelines.transforms.frames",
    "SplitFrames": "pipelines.transforms.frames",
    "plan_cubes": "pipelines.planning.grouping",
    "FrameKey": "pipelines.transforms.frames",
    "ManifestEntry": "pipelines.transforms.manifest",
    "ReadSceneMetadata": "pipelines.transforms.read_metadata",
    "ConvertOptions": "pipelines.options",
    "CubePlan": "pipelines.planning.plan",
    "Scene": "pipelines.planning.scene",
    "SceneRef": "pipelines.planning.scene",
    "choose_codec": "pipelines.planning.codec_choice",
    "choose_frame_unit": "pipelines.planning.codec_choice",
    "WriteDeadLetters": "pipelines.transforms.dead_letters",
    "WriteManifest": "pipelines.transforms.manifest",
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
