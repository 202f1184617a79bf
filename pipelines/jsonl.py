"""JSON-lines files of a run (the manifest, the dead letters, published records), local or in a bucket.

One JSON object per line, keys sorted and no NaN, so the same records give
the same bytes. A file is written whole: a local one through a temporary and
a rename (:func:`rumi_core.files.write_atomic`), a ``gs://`` object by one
upload, which GCS makes visible only once complete.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from pipelines.bucket import is_gs, output_store
from rumi_core.files import write_atomic

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["load_jsonl", "write_jsonl"]


def load_jsonl(path: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file or ``gs://`` object; an absent one has none."""
    if is_gs(path):
        data = output_store().read(path)
        return [] if data is None else [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_jsonl(path: str, records: Sequence[dict[str, Any]], *, temp_dir: str | None = None) -> int:
    """Write one JSON object per line, atomically (a ``gs://`` object appears whole); return the number of lines.

    A local file's temporary goes to ``temp_dir`` when given (see :func:`rumi_core.files.write_atomic`).
    A local file that already holds these bytes is left as it is, its time
    too: a re-run that changes nothing makes a folder synchronised by
    modification time (``rsync``) send nothing.
    """
    data = "".join(json.dumps(r, sort_keys=True, allow_nan=False) + "\n" for r in records).encode("utf-8")
    if is_gs(path):
        output_store().write(path, data)
        return len(records)
    if _same_bytes(path, data):
        return len(records)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if temp_dir is not None:
        os.makedirs(temp_dir, exist_ok=True)
    write_atomic(path, data, temp_dir=temp_dir)
    return len(records)


def _same_bytes(path: str, data: bytes) -> bool:
    """Whether the local file at ``path`` exists and holds exactly ``data``."""
    try:
        if os.path.getsize(path) != len(data):
            return False
        with open(path, "rb") as f:
            return f.read() == data
    except OSError:
        return False
