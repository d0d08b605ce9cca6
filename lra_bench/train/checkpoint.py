"""Training checkpoints: atomic, checksummed, with everything a bit-exact resume needs.

A checkpoint holds the model, optimizer and scheduler states, the RNG states (python, numpy, torch, CUDA),
the step (= the data position: batches are a pure function of (seed, step)), the best-validation weights
and score so far, the evaluation history, the running training metrics and the timed step durations.

Files: ``<dir>/ckpt.pt`` and ``<dir>/ckpt.json`` (step + sha256 of ckpt.pt, written after it). The previous
good pair is kept as ``ckpt.prev.*``. Each file is written to a temporary name, fsynced and renamed, so an
interruption or a full disk leaves the previous checkpoint intact; a checkpoint whose checksum does not
match (truncated, corrupt) is skipped with a warning and the previous one is used.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lra_bench.files import disk_full_error, file_sha256, write_json_atomic

log = logging.getLogger(__name__)
CURRENT, PREVIOUS = "ckpt", "ckpt.prev"
FORMAT = 2  # bump when the state layout changes: older checkpoints are skipped, not half-loaded


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save(directory: Path, state: dict[str, Any]) -> Path:
    """Write ``state`` as the current checkpoint; the old current one becomes the previous one."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".ckpt.", suffix=".tmp")
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        torch.save(state, tmp_path)
        with tmp_path.open("rb") as f:
            os.fsync(f.fileno())
        meta = {"step": int(state["step"]), "sha256": file_sha256(tmp_path), "format": FORMAT}
        current = directory / f"{CURRENT}.pt"
        if current.exists() and (directory / f"{CURRENT}.json").exists():
            shutil.copyfile(directory / f"{CURRENT}.json", directory / f".{PREVIOUS}.json.tmp")
            os.replace(current, directory / f"{PREVIOUS}.pt")
            os.replace(directory / f".{PREVIOUS}.json.tmp", directory / f"{PREVIOUS}.json")
        os.replace(tmp_path, current)
        write_json_atomic(directory / f"{CURRENT}.json", meta)
    except BaseException as e:
        tmp_path.unlink(missing_ok=True)
        if isinstance(e, OSError | RuntimeError) and (full := disk_full_error(directory, "a checkpoint", e)):
            raise full from e  # torch.save reports a full disk as "RuntimeError: ... unexpected pos"
        raise
    return directory / f"{CURRENT}.pt"


def load(directory: Path) -> dict[str, Any] | None:
    """The newest checkpoint in ``directory`` whose checksum verifies, or None (with a warning per bad one)."""
    for name in (CURRENT, PREVIOUS):
        pt, meta_path = Path(directory) / f"{name}.pt", Path(directory) / f"{name}.json"
        if not pt.exists():
            continue
        try:
            meta = json.loads(meta_path.read_text())
            if meta.get("format") != FORMAT:
                raise ValueError(f"written by another version of lra-bench (format {meta.get('format')}, "
                                 f"this one reads {FORMAT}); training starts afresh")
            if file_sha256(pt) != meta["sha256"]:
                raise ValueError("checksum mismatch (truncated or corrupt file)")
            state = torch.load(pt, map_location="cpu", weights_only=False)
        except (OSError, ValueError, KeyError, RuntimeError, EOFError) as e:
            log.warning("skipping checkpoint %s: %s", pt, e)
            continue
        log.info("resuming from %s (step %d)", pt, meta["step"])
        return state
    return None


def clear(directory: Path) -> None:
    """Remove a finished run's checkpoints (its record is the result)."""
    shutil.rmtree(directory, ignore_errors=True)
