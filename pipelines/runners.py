"""Beam runners: the runner a name means, a local run's workers, and whether a runner's workers can import rumi.

:func:`resolve_runner` reads a runner name as Beam does; :func:`local_workers`
gives a local run (:data:`LOCAL_RUNNERS`) one worker thread per usable core;
:func:`stock_worker_image` tells a portable runner that would start its
workers from Beam's own SDK image, which has none of rumi's packages.

Beam is imported only when called: the CLI imports this module, and
importing Beam both takes seconds and logs through the root logger, which
would configure logging before ``rumi -v`` does.
"""

from __future__ import annotations

import logging
import os
import re
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "DEFAULT_RUNNER",
    "LOCAL_RUNNERS",
    "MAX_WORKERS_PER_CORE",
    "RUNNER_NAMES",
    "local_workers",
    "quiet_dask",
    "resolve_runner",
    "stock_worker_image",
    "usable_cores",
]

DEFAULT_RUNNER = "FnApiRunner"
"""Runner used when none is given: Beam's portable in-process runner, without the Prism download."""

RUNNER_NAMES: Final = {"DaskRunner": "apache_beam.runners.dask.dask_runner.DaskRunner"}
"""Runners Beam knows only by their qualified class name, by their short one."""


def resolve_runner(name: str) -> str | None:
    """The runner ``name`` means, as Beam looks it up (any case, with or without "Runner"), or None for none.

    A known short name comes back as Beam spells it (``fnapi`` is ``FnApiRunner``), one of
    :data:`RUNNER_NAMES` (``dask``) as its qualified class name; a qualified name as given.

    >>> resolve_runner("fnapi"), resolve_runner("dask"), resolve_runner("Foo")
    ('FnApiRunner', 'apache_beam.runners.dask.dask_runner.DaskRunner', None)
    """
    from apache_beam.options.pipeline_options import StandardOptions

    if "." in name:
        return name
    names = {n.lower(): RUNNER_NAMES.get(n, n) for n in (*StandardOptions.KNOWN_RUNNER_NAMES, *RUNNER_NAMES)}
    return names.get(name.lower()) or names.get(f"{name.lower()}runner")


def _not_a_changed_run_spec(record: logging.LogRecord) -> bool:
    return "Detected different `run_spec`" not in record.getMessage()


def quiet_dask() -> None:
    """Keep dask.distributed's chatter off the terminal for a DaskRunner run, as Beam's workers' is.

    Its INFO lines (cluster start, workers, plugins) show with ``-v``. Its
    warning that a key came again with another ``run_spec`` is dropped: Beam's
    DaskRunner sends its stages' keys again, and a run of a few cubes printed
    it 18 to 328 times, identical on every runner's bytes. Its other warnings
    (a worker past its memory budget) still show. ``distributed`` sets its
    loggers' levels from dask's configuration as it is imported, and its
    worker processes inherit that configuration, so both are set.
    """
    import dask
    import distributed  # noqa: F401 - its loggers are set as it is imported

    if logging.getLogger().getEffectiveLevel() > logging.INFO:
        dask.config.set({"logging.distributed": "warning"})
        logging.getLogger("distributed").setLevel(logging.WARNING)
    logging.getLogger("distributed.scheduler").addFilter(_not_a_changed_run_spec)


MAX_WORKERS_PER_CORE: Final = 16
"""The most worker threads or processes per usable core a local run takes: each is a Beam worker with its own
threads and connections, started one after another, and far more than the cores buys nothing (a count in the
billions never finished starting)."""

LOCAL_RUNNERS = ("FnApiRunner", "DirectRunner")
"""Runners that take ``--direct_running_mode`` and ``--direct_num_workers`` (the DirectRunner runs batch jobs on the FnApiRunner)."""


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS reports it, else every core)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def local_workers(beam_args: Sequence[str]) -> list[str]:
    """The Beam options a local run adds to ``beam_args``, after them: one worker thread per usable core unless they chose.

    A worker count of 0 means one per usable core, as it means one per CPU to Beam.

    A running mode given alone keeps it (``in_memory`` is one worker by
    definition; processes get one per core); a worker count given alone runs
    on threads, since Beam's default ``in_memory`` mode ignores it.

    >>> local_workers([])[0]
    '--direct_running_mode=multi_threading'
    >>> local_workers(["--direct_num_workers=3"])
    ['--direct_running_mode=multi_threading']
    >>> local_workers(["--direct_running_mode=in_memory"])
    []
    >>> local_workers(["--direct_num_workers=0"])[-1] == f"--direct_num_workers={usable_cores()}"
    True
    """
    given = {arg.split("=", 1)[0]: arg.partition("=")[2] for arg in beam_args}
    added = []
    mode = given.get("--direct_running_mode")
    if mode is None:
        mode = "multi_threading"
        added.append(f"--direct_running_mode={mode}")
    # Beam reads 0 as every CPU of the machine, whatever this process may use.
    if given.get("--direct_num_workers", "0") == "0" and mode != "in_memory":
        added.append(f"--direct_num_workers={usable_cores()}")
    return added


def stock_worker_image(runner: str | None, given: dict[str, Any]) -> bool:
    """Whether a portable runner would start its workers from Beam's own SDK image, which has none of rumi's packages.

    Beam's PortableRunner starts Docker workers unless ``--environment_type``
    says otherwise, and its FlinkRunner and SparkRunner do too unless the
    master is local (``[auto]``/``[local]``, ``local[...]``: then LOOPBACK); the
    image is ``--environment_config``, ``--environment_options=docker_container_image=...``,
    a prebuilt one, or else ``apache/beam_python3.x_sdk``. Every worker would
    fail its first import. A runner given by its qualified class name is
    judged by its class's name.
    """
    from apache_beam.runners.portability.flink_runner import MAGIC_HOST_NAMES
    from apache_beam.runners.portability.spark_runner import LOCAL_MASTER_PATTERN

    environment = given.get("environment_type")
    if environment is None:
        name = (runner or "").rsplit(".", 1)[-1]
        docker_by_default = (
            name == "PortableRunner"
            or (name == "FlinkRunner" and given.get("flink_master", "[auto]") not in MAGIC_HOST_NAMES)
            or (name == "SparkRunner" and not re.match(LOCAL_MASTER_PATTERN, given.get("spark_master_url") or "local[4]"))
        )
        if not docker_by_default:
            return False
    elif environment.upper() not in ("DOCKER", "BEAM:ENV:DOCKER:V1"):
        return False
    named = any(o.startswith("docker_container_image=") for o in given.get("environment_options") or ())
    return not (named or given.get("environment_config") or given.get("prebuild_sdk_container_engine"))
