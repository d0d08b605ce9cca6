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


def report_source(root: Path, environ: dict[str, str]) -> tuple[Path, Path, str]:
    """Which records and benchmark cells a reader with no arguments (the notebook) shows, and a line saying so:
    ``LRA_REPORT_DIR`` (a folder with runs/ and bench/) when set; else your own results (``LRA_RESULTS_DIR`` /
    ``LRA_BENCH_DIR``, default results/runs and results/bench, as run.py writes them) when they hold any record;
    else the curated CPU-scale set results/cpu."""
    if environ.get("LRA_REPORT_DIR"):
        folder = Path(environ["LRA_REPORT_DIR"])
        return folder / "runs", folder / "bench", f"showing {folder} (LRA_REPORT_DIR)"
    runs = Path(environ.get("LRA_RESULTS_DIR") or root / "results" / "runs")
    bench = Path(environ.get("LRA_BENCH_DIR") or root / "results" / "bench")
    if runs.is_dir() and next(runs.rglob("record.json"), None) is not None:
        return runs, bench, f"showing your own results: records in {runs}, benchmark cells in {bench}"
    curated = root / "results" / "cpu"
    return curated / "runs", curated / "bench", (
        f"showing the curated CPU-scale set {curated}: there are no records of your own in {runs} yet "
        "(set LRA_REPORT_DIR to show another folder)")
