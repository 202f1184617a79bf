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

A run whose renewals fail (the bucket answering 5xx, a request stuck in
retries) for :data:`LEASE` seconds may have lost its claim to another run,
which then deleted its temporaries: it stops renewing, so as not to take the
folder back, and fails when it ends, naming the folder. Placeholder objects
of the folders (``.rumi-runs/``, ``.rumi-tmp/``, which consoles and gcsfuse
write) name no run, and a claim whose body is not a claim's is one of a run
of unknown origin, which lapses as a killed run's does.

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
from pipelines.errors import OptionError, PipelineError

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from pipelines.options import ConvertOptions

__all__ = ["CLAIMS_DIR", "DETACHED_LEASE", "HEARTBEAT", "LEASE", "claim_detached", "claimed", "release_detached", "release_held"]

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


def _write_claim(folder: str, run_id: str, *, detached: bool, since: float | None) -> float:
    """Write (or renew, by writing it again) a run's claim; return its ``updated``, the server's time now.

    A renewal rewrites the object, since a metadata change is not seen as one by
    gcp-storage-emulator; so the object's creation time is that of its last
    renewal, and the claim records when it was first written (``since``; None
    on the first writing, whose ``updated`` it is).
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
    """The claims on ``folder``, by run id; a body that is not a claim's (hostile or cut short) reads as a claim of unknown origin."""
    store = output_store()
    found = {}
    for url, stat in store.listing(f"{folder}/{CLAIMS_DIR}").items():
        run_id = url.rsplit("/", 1)[-1]
        if not run_id:  # the folder's placeholder object (a console's "create folder"), no run's
            continue
        try:
            record = json.loads(store.read(url) or b"{}")
        except ValueError:
            record = {}
        if not isinstance(record, dict):
            record = {}
        updated = stat.updated or 0.0
        since = record.get("since")
        since = float(since) if isinstance(since, (int, float)) and not isinstance(since, bool) else updated
        holder = f"run {run_id} on {record.get('host', '?')}, process {record.get('pid', '?')}"
        found[run_id] = _Claim(run_id, url, updated, since, record.get("detached") is True, holder)
    return found


class _Holding:
    """This run's claims: on which folders, first written when (server time), last renewed when (this process's clock).

    A claim another run finds unrenewed for :data:`LEASE` seconds is deleted
    with the run's temporaries. The other run judges by the server's times;
    this one cannot know them when a renewal fails or hangs in retries, so it
    counts from the start of its last renewal that succeeded, which the
    server saw no earlier: once :data:`LEASE` has passed on this clock since
    then, the claim may be gone, and this run's temporaries with it
    (:attr:`lost`). Renewing it then would re-create a claim that another run
    has already taken the folder over from, so renewals stop.
    """

    def __init__(self, folders: Sequence[tuple[str, str]], run_id: str, *, detached: bool) -> None:
        self.folders = folders
        self.run_id = run_id
        self.detached = detached
        self.since: dict[str, float] = {}
        self.renewed: dict[str, float] = {}
        self.lost: str | None = None
        """The folder whose claim may have lapsed while this run held it, if any."""

    def write(self, folder: str) -> float:
        """Write or renew the claim on ``folder``; return the server's time now."""
        started = time.monotonic()
        updated = _write_claim(folder, self.run_id, detached=self.detached, since=self.since.get(folder))
        previous = self.renewed.get(folder)
        if previous is not None and time.monotonic() - previous >= LEASE:
            self.lost = folder  # written after it may have lapsed: perhaps re-created after another run deleted it
        self.since.setdefault(folder, updated)
        self.renewed[folder] = started
        return updated

    def renew(self) -> None:
        """Renew every claim, unless one may have lapsed; a failed renewal is logged, and made up by the next."""
        for folder, _ in self.folders:
            if self.lost is None and time.monotonic() - self.renewed[folder] >= LEASE:
                self.lost = folder
            if self.lost is not None:
                return
            try:
                self.write(folder)
            except Exception as err:
                logger.warning("%s: renewing this run's claim failed (%s); it lapses %.0f s after its last renewal", folder, err, LEASE)

    def release(self) -> None:
        store = output_store()
        for folder, _ in self.folders:
            store.delete(_claim_url(folder, self.run_id))


def _lapsed(holding: _Holding, folder: str, other: _Claim) -> bool:
    """Whether an earlier, attached claim has lapsed: wait for its next renewal, at most until :data:`LEASE` has passed.

    This run's own claims are renewed meanwhile, on every folder.
    """
    store = output_store()
    told = False
    while True:
        for each, _ in holding.folders:
            if each != folder:
                holding.write(each)
        now = holding.write(folder)
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


def _settle(holding: _Holding) -> None:
    """Write this run's claims, then stop for an earlier live run, or remove lapsed claims and their runs' temporaries.

    Each folder's claims are ordered by when each was first written on that
    folder: two runs sharing one folder and not another, one of which wrote
    its claim on it after the other had looked, both see the same order there.
    However this fails, this run's claims are withdrawn.

    Raises:
        OptionError: an earlier attached run holds a live claim on a folder (names the option and that run).
    """
    store = output_store()
    try:
        for folder, _ in holding.folders:
            holding.write(folder)
        ended: set[str] = set()
        for folder, option in holding.folders:
            claims = _claims(folder)
            mine = claims.pop(holding.run_id)
            for other in sorted(claims.values(), key=lambda c: c.order):
                if other.detached:
                    if mine.updated - other.updated >= DETACHED_LEASE:
                        store.delete(other.url)
                        ended.add(other.run_id)
                elif other.order > mine.order:
                    continue  # a later run: it withdraws for this one
                elif _lapsed(holding, folder, other):
                    store.delete(other.url)
                    ended.add(other.run_id)
                elif store.stat(other.url) is not None:
                    raise OptionError(
                        f"another rumi convert ({other.holder}) is writing into {folder}; wait for it to end, or give another folder",
                        option=option,
                    )
        out = holding.folders[0][0]
        live = {url.rsplit("/", 1)[-1] for url in store.listing(f"{out}/{CLAIMS_DIR}")} - ended  # runs that claimed meanwhile too
        owners = {url[len(f"{out}/{TMP_DIR}/") :].split("/", 1)[0] for url in store.listing(f"{out}/{TMP_DIR}")}
        owners.discard("")  # the folder's placeholder object, no run's
        for owner in sorted(owners - live):
            store.delete_tree(f"{out}/{TMP_DIR}/{owner}")
    except BaseException:
        holding.release()
        raise


def _folders(options: ConvertOptions) -> list[tuple[str, str]]:
    """The bucket folders a run writes into: ``--out`` first, and a ``gs://`` ``--catalog`` outside it."""
    folders = [(options.out.rstrip("/"), "--out")]
    catalog = os.fspath(options.catalog) if options.write_catalog and options.catalog is not None else None
    if catalog is not None and catalog.startswith("gs://") and not (catalog.rstrip("/") + "/").startswith(folders[0][0] + "/"):
        folders.append((catalog.rstrip("/"), "--catalog"))
    return folders


_HELD: Final[set[_Holding]] = set()
"""The claims this process holds, for :func:`release_held`."""


@contextlib.contextmanager
def claimed(options: ConvertOptions) -> Iterator[ConvertOptions]:
    """Hold this run's claims on its bucket folders while it runs; yield its options with their new ``run_id``.

    On exit, however the run ends, the claims and the run's temporaries are deleted.

    Raises:
        OptionError: another attached run is writing into ``--out`` or the ``--catalog`` (see the module).
        PipelineError: the run ended, but its claim may have lapsed while it ran (renewals failed for
            :data:`LEASE` seconds): another run may have removed its temporaries or replaced its manifest.
    """
    holding = _Holding(_folders(options), uuid.uuid4().hex[:16], detached=False)
    _HELD.add(holding)  # from the first writing: a run interrupted while it waits for another's lease withdraws too
    try:
        _settle(holding)
    except BaseException:
        _HELD.discard(holding)
        raise
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(HEARTBEAT) and holding.lost is None:
            holding.renew()
        if holding.lost is not None:
            logger.error("%s: this run's claim was not renewed for %.0f s; another run may take the folder over", holding.lost, LEASE)

    renewer = threading.Thread(target=renew, name="rumi-claim", daemon=True)
    renewer.start()
    try:
        yield dataclasses.replace(options, run_id=holding.run_id)
    finally:
        stop.set()
        renewer.join()
        output_store().delete_tree(f"{holding.folders[0][0]}/{TMP_DIR}/{holding.run_id}")
        holding.release()
        _HELD.discard(holding)
    if holding.lost is not None:
        raise PipelineError(
            f"{holding.lost}: this run's claim was not renewed for {LEASE:.0f} s, so another run may have taken the folder over "
            "and removed this run's temporaries or replaced its manifest; run the same command again once no other run writes there"
        )


def release_held(timeout: float) -> None:
    """Withdraw the claims this process holds, for at most ``timeout`` seconds: for a process about to end at once (Ctrl-C).

    Without it, the next run into the folder waits for the claims to lapse.
    """

    def release() -> None:
        for holding in list(_HELD):
            holding.release()

    worker = threading.Thread(target=release, name="rumi-claim-release", daemon=True)
    worker.start()
    worker.join(timeout)


def claim_detached(options: ConvertOptions) -> ConvertOptions:
    """Claim the bucket folders for a job that outlives this process; return its options with their new ``run_id``.

    The claim keeps the job's temporaries from deletion by later runs for
    :data:`DETACHED_LEASE`; the job's assemblers delete each cube's temporaries.
    """
    holding = _Holding(_folders(options), uuid.uuid4().hex[:16], detached=True)
    _settle(holding)
    return dataclasses.replace(options, run_id=holding.run_id)


def release_detached(options: ConvertOptions) -> None:
    """Withdraw the claim :func:`claim_detached` made, for a job that was not submitted after all.

    Each failed launch left one, keeping its folder's temporaries from every later run for :data:`DETACHED_LEASE`.
    """
    store = output_store()
    for folder, _ in _folders(options):
        store.delete(_claim_url(folder, options.run_id))
