"""Flex Template entry point: the arguments Dataflow passes are those of ``rumi convert``."""

from __future__ import annotations

import sys

from pipelines.convert import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
