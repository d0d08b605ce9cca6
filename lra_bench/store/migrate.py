"""Records carried across a change of the config layout, so that reports and resumed sweeps still find them.

A record's identity is the hash of its resolved config (``records.semantic_hash``), and its folder is named by it.
When the code moves a class that a config names (a task's ``_target_``), the same experiment gets another hash: its
old records would be run again by a resumed sweep, and a report would not pair them with new ones. ``migrate_tree``
rewrites such records, and those whose hash an earlier rule made (``legacy_hash``), (their config, hash, ``run_id``
and checksum; every other field, the commit and the
predictions included, as it was) and moves their folders to the new names. Each rename is listed in ``RENAMES``
with the change that made it; ``python scripts/migrate_records.py DIR`` runs it over a results folder.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lra_bench.store.files import stable_hash, write_json_atomic
from lra_bench.store.records import (
    ATTEMPTS,
    NON_SEMANTIC_KEYS,
    RECORD_NAME,
    checksum,
    load_verified,
    run_dir,
    semantic_hash,
)

log = logging.getLogger(__name__)

#: class paths a config may name, renamed by a change of the package layout: old -> new
RENAMES: dict[str, str] = {  # issue 42: one folder per task (lra_bench/data/<task>/)
    "lra_bench.data.listops_task.ListOpsTask": "lra_bench.data.listops.task.ListOpsTask",
    "lra_bench.data.pathfinder_task.PathfinderTask": "lra_bench.data.pathfinder.task.PathfinderTask",
    "lra_bench.data.pathfinder_task.PathXTask": "lra_bench.data.pathfinder.task.PathXTask",
    "lra_bench.data.text_task.TextTask": "lra_bench.data.text.task.TextTask",
    "lra_bench.data.image_task.ImageTask": "lra_bench.data.image.task.ImageTask",
    "lra_bench.data.retrieval_task.RetrievalTask": "lra_bench.data.retrieval.task.RetrievalTask",
}


def renamed(value: Any) -> Any:
    """``value`` with every ``_target_`` found in ``RENAMES`` replaced, at any depth."""
    if isinstance(value, dict):
        return {k: (RENAMES.get(v, v) if k == "_target_" and isinstance(v, str) else renamed(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [renamed(v) for v in value]
    return value


def legacy_hash(config: dict[str, Any]) -> str:
    """The hash before ``records.NEUTRAL_DEFAULTS``: every key counted (a record made between a knob's addition and
    its entry there carries this one)."""
    return stable_hash({k: v for k, v in config.items() if k not in NON_SEMANTIC_KEYS})


def migrated(record: dict[str, Any]) -> dict[str, Any] | None:
    """The record as the current code would have written it (renamed classes, today's hash), or None when it needs
    no change. A record whose hash is not its config's (by today's rule or the legacy one) is refused."""
    config = renamed(record.get("config"))
    if not isinstance(config, dict):
        return None
    new_hash = semantic_hash(config)
    if config == record.get("config") and new_hash == record.get("config_hash"):
        return None
    if record.get("config_hash") not in (semantic_hash(record["config"]), legacy_hash(record["config"])):
        raise ValueError(f"its config_hash {record.get('config_hash')} is not the hash of its config: not migrated")
    folder = run_dir(Path("/"), record["task"], record["attention"], record["profile"], record["seed"], new_hash)
    out = {**record, "config": config, "config_hash": new_hash, "run_id": folder.name}
    out["checksum"] = checksum(json.loads(json.dumps(out)))
    return out


@dataclass
class Moved:
    old: Path
    new: Path


def migrate_tree(root: Path, dry_run: bool = False) -> tuple[list[Moved], list[tuple[Path, str]]]:
    """Migrate every run folder under ``root`` whose record names a renamed class; returns the folders moved and
    the records left as they were, with why (unreadable, an inconsistent hash, a target folder already there)."""
    moved: list[Moved] = []
    problems: list[tuple[Path, str]] = []
    for path in sorted(Path(root).rglob(RECORD_NAME)):
        if ATTEMPTS in path.relative_to(root).parts:
            continue
        try:
            record = load_verified(path)
            new = migrated(record)
        except (OSError, ValueError, KeyError) as e:
            problems.append((path, str(e)))
            continue
        if new is None:
            continue
        old_dir = path.parent
        new_dir = old_dir.parent / new["run_id"]
        if (new_dir / RECORD_NAME).exists():  # the same experiment, run again since: its own record stays
            problems.append((path, f"{new_dir / RECORD_NAME} exists already"))
            continue
        moved.append(Moved(old_dir, new_dir))
        if dry_run:
            continue
        new_dir.mkdir(exist_ok=True)  # a lock or an attempt of a later run may be there
        for attempt in sorted((old_dir / ATTEMPTS).glob("*.json")):
            kept = migrated(load_verified(attempt)) or load_verified(attempt)
            write_json_atomic(new_dir / ATTEMPTS / attempt.name, kept)
        write_json_atomic(new_dir / RECORD_NAME, new)
        shutil.rmtree(old_dir)
        log.info("migrated %s -> %s", old_dir, new_dir)
    return moved, problems
