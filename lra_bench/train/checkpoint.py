"""Training checkpoints: atomic, checksummed, with everything a bit-exact resume needs.

A checkpoint holds the model, optimizer and scheduler states, the RNG states (python, numpy, torch, CUDA),
the step (= the data position: batches are a pure function of (seed, step)), the best-validation weights
and score so far, the evaluation history, the running training metrics and the timed step durations.

Files: ``<dir>/ckpt.pt`` and ``<dir>/ckpt.json`` (step + sha256 of ckpt.pt, written after it). The previous
good pair is kept as ``ckpt.prev.*``. Each file is written to a temporary name, fsynced and renamed, so an
interruption or a full disk leaves the previous checkpoint intact; a checkpoint whose checksum does not
match (truncated, corrupt) is skipped with a warning and the previous one is used. A kill between any two renames
leaves a resumable pair (``load`` pairs metadata and files by checksum). A checkpoint that verifies but no longer
fits the code (a parameter or buffer added since) is set aside (``set_aside``) and the run starts over.

Identity: the metadata also holds the ``identity`` the caller gives ``save`` (the runner's: the config hash, the code
version, and which finished record a rerun replaces); ``stored_identity`` reads it back, so a run can refuse a
checkpoint that another configuration or other code wrote before anything is loaded.
"""

from __future__ import annotations

import datetime as dt
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

from lra_bench.store.files import file_sha256, write_error, write_json_atomic

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


def save(directory: Path, state: dict[str, Any], identity: dict[str, Any] | None = None) -> Path:
    """Write ``state`` as the current checkpoint, with ``identity`` in its metadata; the old current one becomes the
    previous one."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".ckpt.", suffix=".tmp")
    except OSError as e:
        raise (write_error(directory, "a checkpoint", e) or e) from e
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        torch.save(state, tmp_path)
        with tmp_path.open("rb") as f:
            os.fsync(f.fileno())
        meta = {"step": int(state["step"]), "sha256": file_sha256(tmp_path), "format": FORMAT,
                "identity": identity}
        current = directory / f"{CURRENT}.pt"
        if current.exists() and (directory / f"{CURRENT}.json").exists():
            shutil.copyfile(directory / f"{CURRENT}.json", directory / f".{PREVIOUS}.json.tmp")
            os.replace(current, directory / f"{PREVIOUS}.pt")
            os.replace(directory / f".{PREVIOUS}.json.tmp", directory / f"{PREVIOUS}.json")
        os.replace(tmp_path, current)
        write_json_atomic(directory / f"{CURRENT}.json", meta)
    except BaseException as e:
        written = tmp_path.stat().st_size if tmp_path.exists() else None
        tmp_path.unlink(missing_ok=True)
        if isinstance(e, OSError | RuntimeError) and (failed := write_error(directory / f"{CURRENT}.pt",
                                                                           "a checkpoint", e, written)):
            raise failed from e  # torch.save reports a full disk or a file-size limit as "RuntimeError: unexpected pos"
        raise
    return directory / f"{CURRENT}.pt"


def load(directory: Path) -> dict[str, Any] | None:
    """The newest checkpoint in ``directory`` whose checksum verifies, or None (with a warning per bad one).

    Each ``ckpt*.json`` names its file by sha256, and either ``.pt`` may hold it: a save interrupted between two of
    its renames leaves the newest complete pair under mixed names (``ckpt.json`` of step s beside the file of step s
    already renamed to ``ckpt.prev.pt``), and that pair is found and used."""
    directory = Path(directory)
    files = [directory / f"{name}.pt" for name in (CURRENT, PREVIOUS) if (directory / f"{name}.pt").is_file()]
    metas = []
    for name in (CURRENT, PREVIOUS):
        meta_path = directory / f"{name}.json"
        if not meta_path.is_file():
            continue
        try:
            meta = json.loads(meta_path.read_text())
            if not isinstance(meta, dict) or not isinstance(meta.get("step"), int) or "sha256" not in meta:
                raise ValueError("not a JSON object with 'step' and 'sha256'")
            if meta.get("format") != FORMAT:
                raise ValueError(f"written by another version of lra-bench (format {meta.get('format')}, "
                                 f"this one reads {FORMAT}); training starts afresh")
        except (OSError, ValueError) as e:
            log.warning("skipping checkpoint %s: %s", meta_path, e)
            continue
        metas.append((meta, meta_path))
    shas: dict[Path, str] = {}
    for meta, meta_path in sorted(metas, key=lambda m: m[0]["step"], reverse=True):
        for pt in files:
            if pt not in shas:
                shas[pt] = file_sha256(pt)
            if shas[pt] != meta["sha256"]:
                continue
            try:
                state = torch.load(pt, map_location="cpu", weights_only=False)
            except Exception as e:  # noqa: BLE001 - an unreadable pickle, whatever the error, is not resumed from
                log.warning("skipping checkpoint %s: %s", pt, e)
                continue
            log.info("resuming from %s (step %d)", pt, meta["step"])
            return state
        log.warning("skipping checkpoint %s (step %d): checksum mismatch (its file is truncated, corrupt or missing)",
                    meta_path, meta["step"])
    return None


NO_IDENTITY: dict[str, Any] = {}  # what ``stored_identity`` returns for a checkpoint written before identities


def stored_identity(directory: Path) -> dict[str, Any] | None:
    """The identity saved with the newest checkpoint metadata in ``directory`` (``NO_IDENTITY`` when it predates
    identities), or None when there is no readable checkpoint metadata at all."""
    found = []
    for name in (CURRENT, PREVIOUS):
        try:
            meta = json.loads((Path(directory) / f"{name}.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(meta, dict) and isinstance(meta.get("step"), int):
            found.append(meta)
    if not found:
        return None
    newest = max(found, key=lambda m: m["step"])
    return newest.get("identity") if isinstance(newest.get("identity"), dict) else NO_IDENTITY


def set_aside(directory: Path, why: str) -> Path:
    """Move the checkpoints of ``directory`` that cannot be resumed (``why``) out of the run's way, to a sibling
    ``<name>.unusable-<time>`` kept for inspection, so the run starts over instead of failing on every rerun."""
    directory = Path(directory)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    aside = directory.with_name(f"{directory.name}.unusable-{stamp}-{os.getpid()}")
    os.replace(directory, aside)
    log.warning("setting aside the checkpoint of %s, which this code cannot resume (%s): moved to %s; training "
                "starts over. Delete that folder when you no longer need it.", directory, why, aside)
    return aside


def clear(directory: Path) -> None:
    """Remove a finished run's checkpoints (its record is the result)."""
    shutil.rmtree(directory, ignore_errors=True)


def exists(directory: Path) -> bool:
    """Whether ``directory`` holds a checkpoint's metadata (cheap: nothing is read or verified; ``load`` does that)."""
    return any((Path(directory) / f"{name}.json").is_file() for name in (CURRENT, PREVIOUS))
