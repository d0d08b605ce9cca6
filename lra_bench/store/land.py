"""Land finished run records from a sweep's scratch results folder into a curated one, losing nothing.

A curated sweep runs in its own checkout and writes to a scratch folder (``LRA_RESULTS_DIR``); its finished records
are copied into the repository's curated folder as they land, across sittings. :func:`land` does that copy with the
checks a curated set needs: only verified ``ok`` records with per-example predictions that decode, made at the
sweep's commit from a clean checkout, each into the same ``<task>/<attention>/<profile>-seed<S>-<hash>/record.json``
folder; a record already there unchanged is skipped, and one that differs is never overwritten (a conflict to resolve by
hand: a curated record is replaced only on purpose).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lra_bench.errors import ConfigError, LRABenchError
from lra_bench.store import predictions
from lra_bench.store.files import write_json_atomic
from lra_bench.store.records import RECORD_NAME, read_record, read_tree, resumed, run_dir, run_wall_seconds


@dataclass
class Landing:
    """What :func:`land` did (or, dry, would do): each entry a (source path, record) or (source path, reason)."""

    added: list[tuple[Path, dict[str, Any]]] = field(default_factory=list)
    present: list[Path] = field(default_factory=list)  # the same record is already in the curated folder
    conflicts: list[tuple[Path, str]] = field(default_factory=list)  # another record in its folder: kept as it was
    refused: list[tuple[Path, str]] = field(default_factory=list)  # not fit for a curated set, with the reason
    unreadable: list[Path] = field(default_factory=list)  # failed verification (truncated, edited, misplaced)
    error: str | None = None  # a write failed: copying stopped there (what was added before it is listed)


def sweep_commit(commit: str) -> str:
    """``commit`` as a record's ``git_commit`` starts: 7 to 40 hex digits, lower case; ConfigError otherwise."""
    commit = commit.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{7,40}", commit):
        raise ConfigError(f"the sweep's commit must be 7 to 40 hex digits (git rev-parse --short HEAD in the "
                          f"sweep's checkout), got {commit!r}")
    return commit


def refusal(record: dict[str, Any], commit: str, allow_dirty: bool) -> str | None:
    """Why ``record`` may not enter a curated set made at ``commit`` (see ``sweep_commit``), or None."""
    if record.get("status") != "ok":
        return f"status {record.get('status')!r} ({str(record.get('message'))[:120]}): rerun it"
    if not record.get(predictions.FIELD):
        return "no per-example test predictions (written before they existed): the paired tests cannot use it"
    try:
        predictions.decode(record[predictions.FIELD])
    except ValueError as e:
        return f"{e}: the paired tests cannot use it"
    made = str(record.get("git_commit") or "")
    if not made:
        return "no git commit (made outside a git checkout)"
    if made.endswith("-dirty") and not allow_dirty:
        return f"made at {made} (uncommitted changes; --allow-dirty when the CURATED file explains them)"
    if not made.startswith(commit):
        return f"made at {made[:12]}, not at the sweep's commit {commit}"
    return None


def land(source: Path, dest: Path, commit: str, allow_dirty: bool = False, dry_run: bool = False) -> Landing:
    """Copy every fit record under ``source`` made at ``commit`` into ``dest`` (see the module's docstring);
    ``dry_run`` copies none and reports what the copy would (the same lists)."""
    commit = sweep_commit(commit)
    found, skipped = read_tree(source)
    out = Landing(unreadable=list(skipped))
    planned: dict[Path, str] = {}  # target -> checksum of what this call copies (or, dry, would) there
    for path, record in found:
        why = refusal(record, commit, allow_dirty)
        if why is not None:
            out.refused.append((path, why))
            continue
        target = run_dir(dest, record["task"], record["attention"], record["profile"], record["seed"],
                         record["config_hash"]) / RECORD_NAME
        if target in planned or target.exists():
            kept = planned.get(target) or (read_record(target) or {}).get("checksum")
            if kept is not None and kept == record["checksum"]:
                out.present.append(path)
            else:
                out.conflicts.append((path, f"{target} holds another record (kept; compare and replace by hand)"))
            continue
        if not dry_run:
            try:
                write_json_atomic(target, record)
            except LRABenchError as e:
                out.error = f"{path} could not be copied: {e}"
                break
        planned[target] = record["checksum"]
        out.added.append((path, record))
    return out


def summary(landing: Landing) -> list[str]:
    """One line per task of the added records: how many, of which mixers and seeds, and their minutes per run."""
    lines = []
    for task in sorted({r["task"] for _, r in landing.added}):
        rows = [r for _, r in landing.added if r["task"] == task]
        minutes = sorted(w / 60 for w in map(run_wall_seconds, rows) if w is not None)
        span = f", {minutes[0]:.1f}-{minutes[-1]:.1f} min per run" if minutes else ""
        mixers = sorted({r["attention"] for r in rows})
        seeds = sorted({r["seed"] for r in rows})
        again = sum(map(resumed, rows))  # training or pretraining resumed
        note = f"; {again} resumed from a checkpoint" if again else ""
        lines.append(f"{task}: {len(rows)} record(s), {len(mixers)} mixer(s) ({', '.join(mixers)}), seeds "
                     f"{', '.join(map(str, seeds))}{span}{note}")
    return lines
