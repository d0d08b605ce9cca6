"""Load a script or tool of this checkout as a module in the test's process (its ``main`` without a Python start-up)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_script(relative: str, name: str) -> ModuleType:
    """``relative`` (e.g. "tools/profile_scaling.py") as module ``name``; its folder is on the import path while it
    loads, for its ``_repo`` import."""
    folder = str((ROOT / relative).parent)
    sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / relative)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)
    return module
