"""pipelines: the Apache Beam conversion pipeline of rumi-forge (``rumi convert``).

Turns archives of GeoTIFF scenes into grid-aligned rumi cubes: discover
scenes, read their metadata, group them into cubes, split the cubes into
frames read through windows, compress the frames in parallel, assemble and
verify each file, build its header blob, and write the run manifest (issue 4).
Runs unchanged on the FnApiRunner (in memory or multi-processing), the
portable runner and the Dask runner.

Imports flow one way: this package uses :mod:`rumi_core`, never the reverse.
"""

from __future__ import annotations

import logging

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
