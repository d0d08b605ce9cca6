"""Imported first by every tool, as ``scripts/_repo.py`` is by every script (which this runs): this checkout's
lra_bench comes first on the import path, and first on ``PYTHONPATH`` for the processes a tool starts."""

from __future__ import annotations

import runpy
from pathlib import Path

ROOT = Path(runpy.run_path(str(Path(__file__).resolve().parents[1] / "scripts" / "_repo.py"))["ROOT"])
