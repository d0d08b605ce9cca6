"""What every tool's markdown starts with (the command, commit, torch and threads) and how it is written."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import _repo  # noqa: F401  (this checkout's lra_bench first: tools/_repo.py)
import torch

from lra_bench.store.files import atomic_open
from lra_bench.store.records import git_commit


def provenance(tool: str) -> str:
    """'Command: `python tools/<tool> <its arguments>`', then the commit, torch, threads and OMP_NUM_THREADS, ending in
    ', ' for the tool's own facts."""
    return (f"Command: `python tools/{tool} {' '.join(sys.argv[1:])}`  \nCommit {git_commit()}, torch "
            f"{torch.__version__}, {torch.get_num_threads()} thread(s), OMP_NUM_THREADS="
            f"{os.environ.get('OMP_NUM_THREADS')}, ")


def write_markdown(text: str, out: Path | None) -> None:
    """Print ``text``, and write it to ``out`` atomically when given."""
    print(text)
    if out:
        with atomic_open(out) as f:
            f.write(text)
