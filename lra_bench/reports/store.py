"""Read a folder of JSON result files into pandas, skipping (and reporting) unreadable ones."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd

from lra_bench.records import verify

log = logging.getLogger(__name__)


def read_json_tree(root: Path, pattern: str = "*.json") -> tuple[list[dict], list[str]]:
    """Every parseable JSON object under ``root`` (temporary ``.*.tmp`` files never match), and the skipped paths."""
    rows, skipped = [], []
    for path in sorted(Path(root).rglob(pattern)):
        if path.name.startswith("."):
            continue
        try:
            row = json.loads(path.read_text())
            if not isinstance(row, dict):
                raise ValueError("not a JSON object")
            if "checksum" in row and not verify(row):
                raise ValueError("checksum mismatch (truncated, corrupt or edited by hand)")
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
