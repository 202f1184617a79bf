"""One attached conversion at a time per bucket folder, by leased claims; temporaries of ended runs removed.

GCS has no ``flock``. A run into a ``gs://`` ``--out`` (and a ``gs://``
``--catalog`` outside it) writes a *claim*, ``FOLDER/.rumi-runs/<run_id>``,
and renews it every :data:`HEARTBEAT` seconds while it runs; it deletes the
claim when it ends, however it fails. A claim not renewed for :data:`LEASE`
seconds belongs to a run that was killed. Times are the server's (each
object's ``updated``, against that of the claim just written), so the
machines' clocks play no part, and no time decides any output's bytes.

At its start a run settles the claims it finds:

* an earlier live claim of a run that waits for its job (the CLI, :func:`pipelines.run`)
  stops this run, naming it (:class:`~pipelines.errors.OptionError`), as a
  second run into a local ``--out`` is stopped (:mod:`pipelines.run_lock`):
  two runs would otherwise replace each other's manifest and catalogue and
  leave cubes unlisted;
* a later claim is that run's to withdraw: of two runs started together, the
  one whose claim was first written first (server time) goes on, ties by run id;
* a lapsed claim is deleted, with its run's temporaries (``.rumi-tmp/<run_id>``).

A detached job (``--detach``, a Dataflow Flex Template) outlives its
launcher, which cannot renew a claim. Its claim marks its temporaries as in
use for :data:`DETACHED_LEASE` seconds, so no later run deletes them under
the job, but it stops no run: launches are scheduled, and refusing the next
one because an earlier job failed would stop a series for good.

gcp-storage-emulator ignores generation preconditions, so claims are not
created with ``if_generation_match=0``: the listing after writing, ordered by
when each claim was first written, decides between runs started together.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import socket
import threading
import time
import uuid
from typing import TYPE_CHECKING, Final

from pipelines.bucket import TMP_DIR, output_store
from pipelines.errors import OptionError

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from pipelines.options import ConvertOptions

__all__ = ["CLAIMS_DIR", "DETACHED_LEASE", "HEARTBEAT", "LEASE", "claim_detached", "claimed"]

logger = logging.getLogger(__name__)

CLAIMS_DIR: Final = ".rumi-runs"
"""Folder of a bucket output (or catalogue) holding the claims of the runs writing into it."""

HEARTBEAT: Final = 5.0
"""Seconds between renewals of a run's claim."""

LEASE: Final = 20.0
"""Seconds after its last renewal that a claim has lapsed: its run was killed (four missed renewals)."""

DETACHED_LEASE: Final = 48 * 3600.0
"""Seconds a detached job's claim keeps its temporaries from deletion (longer than any conversion job)."""


@dataclasses.dataclass(frozen=True)
class _Claim:
    run_id: str
    url: str
    updated: float
    """Server time of its last renewal."""
    since: float
    """Server time of its first writing: runs started together are ordered by it (then by run id)."""
    detached: bool
    holder: str

    @property
    def order(self) -> tuple[float, str]:
        return (self.since, self.run_id)


def _claim_url(folder: str, run_id: str) -> str:
    return f"{folder}/{CLAIMS_DIR}/{run_id}"


def _write_claim(folder: str, run_id: str, *, detached: bool, since: float | None = None) -> float:
    """Write (or renew, by writing it again) this run's claim; return its ``updated``, the server's time now.

    A renewal rewrites the object, since a metadata change is not seen as one by
    gcp-storage-emulator; so the object's creation time is that of its last
    renewal, and the claim records when it was first written (``since``).
    """
    store = output_store()
    url = _claim_url(folder, run_id)
    record = {"run_id": run_id, "host": socket.gethostname(), "pid": os.getpid(), "detached": detached, "since": since}
    store.write(url, json.dumps(record, sort_keys=True).encode())
    stat = store.stat(url)
    if stat is None or stat.updated is None:
        raise OSError(f"{url}: the bucket does not report the claim just written, or its time")
    return stat.updated


def _claims(folder: str) -> dict[str, _Claim]:
    """The claims on ``folder``, by run id."""
    store = output_store()
    found = {}
    for url, stat in store.listing(f"{folder}/{CLAIMS_DIR}").items():
        try:
            record = json.loads(store.read(url) or b"{}")
        except ValueError:
            record = {}
        run_id = url.rsplit("/", 1)[-1]
        updated = stat.updated or 0.0
        since = record.get("since")
        holder = f"run {run_id} on {record.get('host', '?')}, process {record.get('pid', '?')}"
        found[run_id] = _Claim(run_id, url, updated, updated if since is None else float(since), bool(record.get("detached")), holder)
    return found


def _lapsed(folder: str, mine: _Claim, other: _Claim) -> bool:
    """Whether an earlier, attached claim has lapsed: wait for its next renewal, at most until :data:`LEASE` has passed."""
    store = output_store()
    told = False
    while True:
        now = _write_claim(folder, mine.run_id, detached=mine.detached, since=mine.since)
        current = store.stat(other.url)
        if current is None:
            return False  # it ended meanwhile: nothing of it to remove, and no run to wait for
        if current.updated != other.updated:
            return False  # renewed: its run is alive
        if now - other.updated >= LEASE:
            return True
        if not told and now - other.updated > 2 * HEARTBEAT:
            logger.warning(
                "%s: the claim of %s was last renewed %.0f s ago; waiting until %.0f s to tell whether it was killed",
                folder, other.holder, now - other.updated, LEASE,
            )  # fmt: skip
            told = True
        time.sleep(min(HEARTBEAT, LEASE - (now - other.updated)))


def _settle(folders: Sequence[tuple[str, str]], run_id: str, *, detached: bool) -> float:
    """Write this run's claims, then stop for an earlier live run, or remove lapsed claims and their runs' temporaries.

    Returns:
        When the claims were first written (server time), for their renewals.

    Raises:
        OptionError: an earlier attached run holds a live claim on a folder (names the option and that run).
    """
    store = output_store()
    since = min(_write_claim(folder, run_id, detached=detached) for folder, _ in folders)
    for folder, _ in folders:
        _write_claim(folder, run_id, detached=detached, since=since)
    ended: set[str] = set()
    for folder, option in folders:
        claims = _claims(folder)
        mine = claims.pop(run_id)
        for other in sorted(claims.values(), key=lambda c: c.order):
            if other.detached:
                if mine.updated - other.updated >= DETACHED_LEASE:
                    store.delete(other.url)
                    ended.add(other.run_id)
            elif other.order > mine.order:
                continue  # a later run: it withdraws for this one
            elif _lapsed(folder, mine, other):
                store.delete(other.url)
                ended.add(other.run_id)
            elif store.stat(other.url) is not None:
                _release(folders, run_id)
                raise OptionError(
                    f"another rumi convert ({other.holder}) is writing into {folder}; wait for it to end, or give another folder",
                    option=option,
                )
    out = folders[0][0]
    live = {url.rsplit("/", 1)[-1] for url in store.listing(f"{out}/{CLAIMS_DIR}")} - ended  # runs that claimed meanwhile too
    owners = {url[len(f"{out}/{TMP_DIR}/") :].split("/", 1)[0] for url in store.listing(f"{out}/{TMP_DIR}")}
    for owner in sorted(owners - live):
        store.delete_tree(f"{out}/{TMP_DIR}/{owner}")
    return since


def _release(folders: Sequence[tuple[str, str]], run_id: str) -> None:
    store = output_store()
    for folder, _ in folders:
        store.delete(_claim_url(folder, run_id))


def _folders(options: ConvertOptions) -> list[tuple[str, str]]:
    """The bucket folders a run writes into: ``--out`` first, and a ``gs://`` ``--catalog`` outside it."""
    folders = [(options.out.rstrip("/"), "--out")]
    catalog = os.fspath(options.catalog) if options.write_catalog and options.catalog is not None else None
    if catalog is not None and catalog.startswith("gs://") and not (catalog.rstrip("/") + "/").startswith(folders[0][0] + "/"):
        folders.append((catalog.rstrip("/"), "--catalog"))
    return folders


@contextlib.contextmanager
def claimed(options: ConvertOptions) -> Iterator[ConvertOptions]:
    """Hold this run's claims on its bucket folders while it runs; yield its options with their new ``run_id``.

    On exit, however the run ends, the claims and the run's temporaries are deleted.

    Raises:
        OptionError: another attached run is writing into ``--out`` or the ``--catalog`` (see the module).
    """
    run_id = uuid.uuid4().hex[:16]
    folders = _folders(options)
    since = _settle(folders, run_id, detached=False)
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(HEARTBEAT):
            for folder, _ in folders:
                with contextlib.suppress(Exception):  # a missed renewal is made up by the next; four in a row lapse the claim
                    _write_claim(folder, run_id, detached=False, since=since)

    renewer = threading.Thread(target=renew, name="rumi-claim", daemon=True)
    renewer.start()
    try:
        yield dataclasses.replace(options, run_id=run_id)
    finally:
        stop.set()
        renewer.join()
        output_store().delete_tree(f"{folders[0][0]}/{TMP_DIR}/{run_id}")
        _release(folders, run_id)


def claim_detached(options: ConvertOptions) -> ConvertOptions:
    """Claim the bucket folders for a job that outlives this process; return its options with their new ``run_id``.

    The claim keeps the job's temporaries from deletion by later runs for
    :data:`DETACHED_LEASE`; the job's assemblers delete each cube's temporaries.
    """
    run_id = uuid.uuid4().hex[:16]
    _settle(_folders(options), run_id, detached=True)
    return dataclasses.replace(options, run_id=run_id)
