"""PyTorch datasets of training chips streamed from rumi cubes.

:class:`RumiChipDataset` is an :class:`torch.utils.data.IterableDataset`
that yields ``(T, B, size, size)`` chips drawn at random (or on a grid) from
a list of items, local or remote; :class:`RumiChipGridDataset` is its
map-style twin for grid sampling. The reading is :mod:`catalog.chips`: one
range request per run of adjacent frames a chip needs and none for metadata,
blobs fetched once per item per worker, one HTTP connection pool per worker
and a bounded LRU of decoded frames per worker.

Each sample is a dict:

* ``"image"``: the chip as a tensor of the file's exact dtype (bfloat16 and
  the float8s included), handed over through DLPack without a copy;
* ``"crs"``: ``"EPSG:n"``; ``"transform"``: the six affine coefficients
  (float64) of the window's top-left pixel corner, as rasterio's
  ``window_transform`` gives them (also for a PixelIsPoint item, whose own
  transform locates pixel centres); ``"time"``: POSIX seconds of each time
  step (int64);
* ``"nodata"``: each band's no-data value from the item (float64, as
  rasterio gives ``nodata``; NaN for a band without one), so that
  ``(image != nodata[:, None, None]) & ~image.isnan()`` is where the chip holds data
  (a 64-bit integer nodata beyond 2**53 is rounded there, as in rasterio: compare
  with the item's own value for those);
* ``"scale"`` and ``"offset"``: each band's, from the item (float64; 1 and 0
  where it states none): ``image * scale[:, None, None] + offset[:, None, None]``
  is the physical value. Items of one dataset may differ in them (a Sentinel-2
  series across processing baseline 04.00 is two cubes, one whose DNs carry
  +1000), and each sample carries its own item's;
* ``"item"``: the file's href; ``"window"``: ``[row0, col0]`` (int64);
  ``"index"``: the sample index.

With ``DataLoader(num_workers=n)`` worker ``w`` yields samples ``w, w + n,
w + 2n...`` of one sample sequence, so the workers' shards are disjoint and
the samples a seed gives do not depend on ``n``; with ``batch_size=None``
(or 1) the DataLoader's round-robin even yields them in the same order.
Under :mod:`torch.distributed` each of the ``world_size`` processes reads
its own share of an epoch's samples, as
:class:`~torch.utils.data.distributed.DistributedSampler` shares indices:
rank ``r`` takes samples ``r, r + world_size...``, and the last ones are
taken again from the start so that every rank reads as many (a rank with
one batch fewer would leave the others waiting at the end of the epoch).
:meth:`RumiChipDataset.set_epoch` draws other random chips for each epoch.
Batching stacks chips, so the items of one dataset must give chips of one
dtype, with as many bands and time steps (select ``bands`` and ``times``
accordingly); other items are refused when the dataset is made.

PyTorch is optional for the catalog package: this module alone needs it.
"""

from __future__ import annotations

import ctypes
import math
import multiprocessing
import operator
import warnings
from multiprocessing.context import get_spawning_popen
from typing import TYPE_CHECKING, Any, Literal, SupportsIndex, TypedDict

try:
    import torch
    from torch.utils.data import Dataset, IterableDataset, get_worker_info
    from torch.utils.dlpack import from_dlpack
except ImportError as err:  # pragma: no cover - exercised only without torch
    raise ImportError("catalog.torch needs PyTorch: pip install torch") from err

from catalog.chips import DEFAULT_CACHE_BYTES, Chip, ChipReader, ChipSampler, SmallItemWarning, parse_int
from rumi_core.dlpack import DLPackArray

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from typing import Unpack

    from catalog.selectors import TimeRange

__all__ = ["ChipOptions", "RumiChipDataset", "RumiChipGridDataset", "chip_sample"]


def chip_sample(chip: Chip) -> dict[str, Any]:
    """Turn a :class:`~catalog.chips.Chip` into the sample dict (the image through DLPack)."""
    transform = tuple(chip.transform[:6]) if chip.transform is not None else (float("nan"),) * 6
    return {
        "image": from_dlpack(DLPackArray(chip.data)),
        "crs": chip.crs or "",
        "transform": torch.tensor(transform, dtype=torch.float64),
        "time": torch.tensor(chip.times, dtype=torch.int64),
        "nodata": torch.tensor([math.nan if v is None else v for v in chip.nodata], dtype=torch.float64),
        "scale": torch.tensor(chip.scale, dtype=torch.float64),
        "offset": torch.tensor(chip.offset, dtype=torch.float64),
        "item": chip.item,
        "window": torch.tensor([chip.window[0][0], chip.window[1][0]], dtype=torch.int64),
        "index": chip.index,
    }


class ChipOptions(TypedDict, total=False):
    """The keyword arguments both datasets take (see :class:`RumiChipDataset`), each with its default."""

    bands: Sequence[int | str] | int | str | None
    times: Sequence[int] | str | TimeRange | None
    size: int
    length: int | None
    cache_bytes: int
    fetch_threads: int
    http_headers: Mapping[str, str] | None
    timeout: float | None


class _Chips:
    """The reader and sampler shared by both datasets, and the one home of their defaults."""

    def __init__(
        self,
        items: Sequence[Any],
        *,
        sampler: Literal["random", "grid"],
        seed: int,
        bands: Sequence[int | str] | int | str | None = None,
        times: Sequence[int] | str | TimeRange | None = None,
        size: int = 256,
        length: int | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        fetch_threads: int = 8,
        http_headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        self.reader = ChipReader(
            items,
            bands=bands,
            times=times,
            cache_bytes=cache_bytes,
            fetch_threads=fetch_threads,
            http_headers=http_headers,
            timeout=timeout,
        )
        # The sampler needs the items' shapes: opening them here checks every item
        # (and its band and time selection) before any worker starts.
        shapes = self.reader.shapes()
        self.sampler = ChipSampler(shapes, size=size, sampler=sampler, length=length, seed=seed)
        small = sorted(set(range(len(shapes))) - set(self.sampler.items))
        if small:
            side = self.sampler.size
            names = ", ".join(f"{self.reader.state.cubes[i].name} ({shapes[i][0]} x {shapes[i][1]})" for i in small[:10])
            more = f" and {len(small) - 10} more" if len(small) > 10 else ""
            message = f"{len(small)} of {len(shapes)} items are smaller than {side} x {side} pixels and give no chips: {names}{more}"
            warnings.warn(message, SmallItemWarning, stacklevel=3)

    def sample(self, index: int, epoch: int = 0) -> dict[str, Any]:
        return chip_sample(self.reader.read(index, self.sampler.position(index, epoch=epoch), self.sampler.size))


class _SharedEpoch:
    """The epoch, in memory the DataLoader's worker processes share with the process that sets it.

    A DataLoader with ``persistent_workers=True`` starts its workers once: a
    plain attribute would stay in each worker's copy of the dataset as it was
    then, and every epoch would draw the same chips. The value lives in
    shared memory (:func:`multiprocessing.RawValue`), which a worker started
    by fork inherits and one started by spawn or forkserver receives while it
    is started; pickled anywhere else (to a file, to a dask worker) the
    dataset takes the value alone.
    """

    def __init__(self, value: int = 0) -> None:
        self._cell = multiprocessing.RawValue(ctypes.c_int64, value)

    @property
    def value(self) -> int:
        """The epoch now."""
        return int(self._cell.value)

    @value.setter
    def value(self, epoch: int) -> None:
        self._cell.value = epoch

    def __getstate__(self) -> dict[str, Any]:
        return {"cell": self._cell} if get_spawning_popen() is not None else {"value": self.value}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._cell = state["cell"] if "cell" in state else multiprocessing.RawValue(ctypes.c_int64, state["value"])


class RumiChipDataset(IterableDataset[dict[str, Any]]):
    """Stream ``(T, B, size, size)`` chips from rumi cubes.

    Items smaller than ``size`` on a side give no chips: a
    :class:`~catalog.chips.SmallItemWarning` names them, and a
    :class:`SelectorError` is raised when no item is large enough.

    Args:
        items: STAC items (dicts, :class:`pystac.Item`, hrefs), ``.rumi``
            hrefs or the hits of :func:`catalog.search`.
        bands: Band names or positions, or one name or position, resolved in
            each item; None for all.
        times: Time positions, an ``"A/B"`` range or a :class:`TimeRange`,
            resolved in each item; None for every time step.
        size: Chip side, in pixels (256 by default).
        sampler: ``"random"`` (uniform over every chip position of every
            item) or ``"grid"`` (steps of ``size``, flush with the far edges).
        length: Samples per epoch (>= 1); required for ``"random"``, a cap
            for ``"grid"``.
        seed: Seed of the random positions (>= 0): sample ``i`` of an epoch
            (:meth:`set_epoch`) is the same chip for one seed, whichever
            worker reads it.
        cache_bytes: Decoded frames kept per worker (bytes).
        fetch_threads: Concurrent range requests per worker (>= 1).
        http_headers: Headers sent with every HTTP request.
        timeout: Seconds one remote read (an item, a blob, a chip's frames)
            may take in a worker, every request and retry included (120 by
            default): a stalled server ends the epoch with a ``StorageError``
            naming it after that long.

    Raises:
        SelectorError: a band or time selector matches nothing in an item, no
            item holds a chip of ``size``, the items give chips of other
            dtypes or shapes, or ``size``, ``length``, ``seed``, ``cache_bytes``
            or ``fetch_threads`` is not an integer in its range.
        InvalidInputError: ``timeout`` is no number of seconds above 0.
        StorageError: an item or blob cannot be fetched.

    Warns:
        SmallItemWarning: some items are smaller than ``size`` on a side.
    """

    def __init__(
        self,
        items: Sequence[Any],
        *,
        sampler: Literal["random", "grid"] = "random",
        seed: int = 0,
        **options: Unpack[ChipOptions],
    ) -> None:
        super().__init__()
        self._chips = _Chips(items, sampler=sampler, seed=seed, **options)
        self._epoch = _SharedEpoch()
        self._ranks = _rank()

    def __len__(self) -> int:
        """Samples this process reads in an epoch: all of them, or under :mod:`torch.distributed` its rank's share."""
        _, ranks = self._share()
        return -(-len(self._chips.sampler) // ranks)

    def _share(self) -> tuple[int, int]:
        """``(rank, world_size)``: this process's, or in a DataLoader worker its rank's, as the dataset last saw it.

        A worker started by ``spawn`` or ``forkserver`` has no process group of
        its own, so the rank is taken where the dataset is made and at each
        :meth:`set_epoch`, in the rank's own process, as
        :class:`~torch.utils.data.distributed.DistributedSampler` takes it.
        """
        live = _rank()
        return live if live != (0, 1) else self._ranks

    def set_epoch(self, epoch: int) -> None:
        """Draw the random chips of epoch ``epoch`` (0 until called) from now on.

        Random positions are a pure function of ``(seed, epoch, index)``, so
        each epoch gives other chips, the same for any ``num_workers``. Under
        :mod:`torch.distributed` it also takes this process's rank. Call
        it before each epoch's iteration, as for
        :class:`~torch.utils.data.distributed.DistributedSampler`; workers a
        DataLoader keeps (``persistent_workers=True``) see it too. Grid
        positions do not depend on it.

        Raises:
            SelectorError: ``epoch`` is not an integer >= 0.
        """
        self._epoch.value = parse_int("epoch", epoch, least=0)
        self._ranks = _rank()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        rank, ranks = self._share()
        count = len(self._chips.sampler)
        epoch = self._epoch.value  # once per pass: a set_epoch during it changes the next one
        for step in range(worker, -(-count // ranks), workers):
            yield self._chips.sample((rank + step * ranks) % count, epoch)


def _rank() -> tuple[int, int]:
    """``(rank, world_size)`` of this process under :mod:`torch.distributed`, ``(0, 1)`` outside it."""
    distributed = torch.distributed
    if distributed.is_available() and distributed.is_initialized():
        return distributed.get_rank(), distributed.get_world_size()
    return 0, 1


class RumiChipGridDataset(Dataset[dict[str, Any]]):
    """Map-style chips on a grid: ``dataset[i]`` is the ``i``-th grid position.

    Arguments, errors and warnings as for :class:`RumiChipDataset`, without
    ``sampler`` and ``seed``.
    """

    def __init__(self, items: Sequence[Any], **options: Unpack[ChipOptions]) -> None:
        self._chips = _Chips(items, sampler="grid", seed=0, **options)

    def __len__(self) -> int:
        return len(self._chips.sampler)

    def __getitem__(self, index: SupportsIndex) -> dict[str, Any]:
        """The chip at grid position ``index``, which counts from the end when negative.

        Raises:
            TypeError: ``index`` is not an integer (any ``__index__``, but not a bool).
            IndexError: ``index`` is outside ``-len..len - 1``.
        """
        if isinstance(index, bool) or not isinstance(index, SupportsIndex):
            raise TypeError(f"sample indices are integers, not {type(index).__name__}")
        i = operator.index(index)
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"sample {i} is outside {-n}..{n - 1}")
        return self._chips.sample(i % n)
