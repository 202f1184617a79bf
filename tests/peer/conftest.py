"""The scripts here run in the rumi-eo peer environment, not in rumi_core's.

They import ``rumi`` (rumi-eo), which is not installed beside rumi_core, so
pytest must not import them while collecting doctests.
"""

collect_ignore_glob = ["rumi_eo_*.py"]
