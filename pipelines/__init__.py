"""pipelines: the Apache Beam conversion pipeline of rumi-forge (``rumi convert``).

Turns archives of GeoTIFF scenes into grid-aligned rumi cubes: discover
scenes, read their metadata, group them into cubes, split the cubes into
frames read through windows, compress the frames in parallel, assemble and
verify each file, build its header blob, and write the run manifest.
Runs unchanged on the FnApiRunner (by default one worker thread per core,
through :mod:`pipelines.threaded_runner`; in memory or multi-processing on
request), the portable runner and the Dask runner.

Imports flow one way: this package uses :mod:`rumi_core`, never the reverse.
"""

import logging

import lazy_loader

# Names load on first use (lazy_loader reads the public API from
# ``__init__.pyi``), so that listing the ``rumi`` commands or reading
# ``rumi convert --help`` does not import Apache Beam.
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)


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
