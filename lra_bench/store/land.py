"""Land finished run records from a sweep's scratch results folder into a curated one, losing nothing.

A curated sweep runs in its own checkout and writes to a scratch folder (``LRA_RESULTS_DIR``); its finished records
are copied into the repository's curated folder as they land, across sittings. :func:`land` does that copy with the
checks a curated set needs: only verified ``ok`` records with per-example predictions, made at a clean commit (the
sweep's, when one is named), each into the same ``<task>/<attention>/<profile>-seed<S>-<hash>/record.json`` folder;
a record already there unchanged is skipped, and one that differs is never overwritten (a conflict to resolve by
hand: a curated record is replaced only on purpose).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lra_bench.store.files import write_json_atomic
from lra_bench.store.records import RECORD_NAME, read_record, read_tree, run_dir, run_wall_seconds


@dataclass
class Landing:
    """What :func:`land` did (or, dry, would do): each entry a (source path, record) or (source path, reason)."""

    added: list[tuple[Path, dict[str, Any]]] = field(default_factory=list)
    present: list[Path] = field(default_factory=list)  # the same record is already in the curated folder
    conflicts: list[tuple[Path, str]] = field(default_factory=list)  # another record in its folder: kept as it was
    refused: list[tuple[Path, str]] = field(default_factory=list)  # not fit for a curated set, with the reason
    unreadable: list[Path] = field(default_factory=list)  # failed verification (truncated, edited, misplaced)


def refusal(record: dict[str, Any], commit: str | None, allow_dirty: bool) -> str | None:
    """Why ``record`` may not enter a curated set, or None."""
    if record.get("status") != "ok":
        return f"status {record.get('status')!r} ({str(record.get('message'))[:120]}): rerun it"
    if not record.get("test_predictions"):
        return "no per-example test predictions (written before they existed): the paired tests cannot use it"
    made = str(record.get("git_commit") or "")
    if not made:
        return "no git commit (made outside a git checkout)"
    if made.endswith("-dirty") and not allow_dirty:
        return f"made at {made} (uncommitted changes; --allow-dirty when the CURATED file explains them)"
    if commit and not made.startswith(commit):
        return f"made at {made[:12]}, not at the sweep's commit {commit}"
    return None


def land(source: Path, dest: Path, commit: str | None = None, allow_dirty: bool = False,
         dry_run: bool = False) -> Landing:
    """Copy every fit record under ``source`` into ``dest`` (see the module's docstring); ``dry_run`` copies none."""
    found, skipped = read_tree(source)
    out = Landing(unreadable=list(skipped))
    for path, record in found:
        why = refusal(record, commit, allow_dirty)
        if why is not None:
            out.refused.append((path, why))
            continue
        target = run_dir(dest, record["task"], record["attention"], record["profile"], record["seed"],
                         record["config_hash"]) / RECORD_NAME
        if target.exists():
            kept = read_record(target)
            if kept is not None and kept.get("checksum") == record["checksum"]:
                out.present.append(path)
            else:
                out.conflicts.append((path, f"{target} holds another record (kept; compare and replace by hand)"))
            continue
        if not dry_run:
            write_json_atomic(target, record)
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
        resumed = sum(bool(r.get("restarts")) for r in rows)
        note = f"; {resumed} resumed from a checkpoint" if resumed else ""
        lines.append(f"{task}: {len(rows)} record(s), {len(mixers)} mixer(s) ({', '.join(mixers)}), seeds "
                     f"{', '.join(map(str, seeds))}{span}{note}")
    return lines
