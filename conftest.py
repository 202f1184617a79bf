"""Collection rules for the packages' doctests: PyTorch is optional, and only catalog/torch.py needs it."""

from __future__ import annotations

import importlib.util

collect_ignore = [] if importlib.util.find_spec("torch") is not None else ["catalog/torch.py"]
