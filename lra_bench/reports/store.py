"""Read a folder of JSON result files into pandas, skipping (and reporting) unreadable ones."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lra_bench.store.records import read_tree


def read_json_tree(root: Path, pattern: str = "*.json") -> tuple[list[dict], list[str]]:
    """Every verified result under ``root`` (``records.read_tree``: the runner's rule), each with its ``_path``,
    and the skipped paths."""
    found, skipped = read_tree(root, pattern)
    return [{**record, "_path": str(path)} for path, record in found], [str(p) for p in skipped]


def flatten(rows: list[dict]) -> pd.DataFrame:
    """One row per record, nested dicts flattened with '.' (``throughput.steps_per_s``)."""
    return pd.json_normalize(rows, sep=".") if rows else pd.DataFrame()
