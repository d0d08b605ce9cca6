"""Read a folder of JSON result files into pandas, skipping (and reporting) unreadable ones."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from lra_bench.records import ATTEMPTS, load_verified

log = logging.getLogger(__name__)


def read_json_tree(root: Path, pattern: str = "*.json") -> tuple[list[dict], list[str]]:
    """Every verified result under ``root`` (``records.load_verified``: the runner's rule) and the skipped paths;
    temporary ``.*.tmp`` files and anything under a run's ``attempts/`` never match."""
    rows, skipped = [], []
    for path in sorted(Path(root).rglob(pattern)):
        if path.name.startswith(".") or ATTEMPTS in path.relative_to(root).parts[:-1]:
            continue
        try:
            row = load_verified(path)
        except (OSError, ValueError) as e:
            log.warning("skipping unreadable result %s: %s", path, e)
            skipped.append(str(path))
            continue
        row["_path"] = str(path)
        rows.append(row)
    return rows, skipped


def flatten(rows: list[dict]) -> pd.DataFrame:
    """One row per record, nested dicts flattened with '.' (``throughput.steps_per_s``)."""
    return pd.json_normalize(rows, sep=".") if rows else pd.DataFrame()
