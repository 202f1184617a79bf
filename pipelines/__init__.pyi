"""Type stub of :mod:`pipelines`: its public API, loaded lazily by ``lazy_loader.attach_stub``."""

from .cli import main as main
from .convert import Convert as Convert
from .convert import run as run
from .errors import (
    AssemblyError as AssemblyError,
)
from .errors import (
    OptionError as OptionError,
)
from .errors import (
    PipelineError as PipelineError,
)
from .errors import (
    SceneError as SceneError,
)
from .errors import (
    VerificationError as VerificationError,
)
from .options import ConvertOptions as ConvertOptions
from .planning.codec_choice import choose_codec as choose_codec
from .planning.codec_choice import choose_frame_unit as choose_frame_unit
from .planning.grouping import plan_cubes as plan_cubes
from .planning.plan import CubePlan as CubePlan
from .planning.scene import Scene as Scene
from .planning.scene import SceneRef as SceneRef
from .summary import Summary as Summary
from .transforms.assemble_files import AssembleFiles as AssembleFiles
from .transforms.assemble_files import SkipExisting as SkipExisting
from .transforms.compress import ChooseCodecs as ChooseCodecs
from .transforms.compress import CompressFrames as CompressFrames
from .transforms.dead_letters import DeadLetter as DeadLetter
from .transforms.dead_letters import WriteDeadLetters as WriteDeadLetters
from .transforms.discover import DiscoverScenes as DiscoverScenes
from .transforms.frames import FrameKey as FrameKey
from .transforms.frames import ReadFrames as ReadFrames
from .transforms.frames import SplitFrames as SplitFrames
from .transforms.manifest import ManifestEntry as ManifestEntry
from .transforms.manifest import WriteManifest as WriteManifest
from .transforms.plan_cubes import PlanCubes as PlanCubes
from .transforms.read_metadata import ReadSceneMetadata as ReadSceneMetadata
from .transforms.write_parts import PrepareParts as PrepareParts
from .transforms.write_parts import WriteParts as WriteParts

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
