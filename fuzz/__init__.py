"""A structure-aware fuzzing harness for rumi files and header blobs.

The harness takes valid files and blobs (:mod:`fuzz.corpus`), breaks them
where the specification puts structure (:mod:`fuzz.mutate`: IFD entries, tag
values, counts, offsets, trailer fields, frames, blob fields, and consistent
edits of file and blob together), and hands each result to an entry point of
rumi_core or catalog (:mod:`fuzz.targets`). An entry point may accept the input
or refuse it with the package's root error; anything else is a finding: another
exception (``MemoryError`` included, since limits must refuse first), a call
that outlives its time limit, a crash of the process, or a read that disagrees
with ``validate``.

Every call runs in a worker process under an address-space limit
(``RLIMIT_AS``, set before rumi_core is imported, so its default
:class:`~rumi_core.Limits` are derived from it) and a per-call time limit
(:mod:`fuzz.runner`). Inputs are a pure function of ``(seed, index)``, so a
finding is reproduced from two numbers; each finding is minimised and kept in
``fuzz/regressions/`` and replayed by ``tests/test_fuzz.py``.

Run ``python -m fuzz --help``, or ``make fuzz``.
"""
