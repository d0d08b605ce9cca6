"""Imported first by every script: this checkout's lra_bench comes first on the import path.

``python scripts/X.py`` puts ``scripts/`` on ``sys.path``, not the repository root, so without this a script would
import whichever lra_bench is installed (an editable install of another checkout or worktree) and record this
checkout's commit beside another's code. The root also goes first on ``PYTHONPATH`` for the processes a script
starts (benchmark cells, sweep jobs).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if sys.path[:1] != [str(ROOT)]:
    sys.path.insert(0, str(ROOT))
_entries = os.environ.get("PYTHONPATH", "").split(os.pathsep) if os.environ.get("PYTHONPATH") else []
if _entries[:1] != [str(ROOT)]:
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *_entries])
