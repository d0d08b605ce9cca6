"""Speed and memory for the bubble chart straight from a sweep's own run records, when no benchmark cells exist.

Every ok record carries its measured training throughput (steps/s over the timed steps, after the warm-up) and
its peak memory during training (``throughput`` and ``memory`` in the record). :func:`cells_from_runs` turns the
records of one task and profile into rows shaped like benchmark cells (``efficiency.load_cells``), so the chart
code reads them the same way; ``source`` = ``"records"`` tells the chart to say where its x axis and circles come
from. These are the speeds of the model the sweep trained, at the task's length -- not LRA's 4K protocol, which
only ``scripts/benchmark.py`` measures (warm-up, repeats, medians, one process timing every variant side by side).

With several seeds per variant, the quartiles of their step times give the horizontal bars and the noise flag
(``noise.NOISY_IQR``); one seed has no spread to show.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np
import pandas as pd

from lra_bench.reports.table1 import scored_runs

T = TypeVar("T")
SOURCE = "records"
LEFT_OUT = "left_out"  # cells.attrs key: attention -> why its records are not on the chart


def pick_task(runs: pd.DataFrame) -> str | None:
    """The task with ok records for the most variants (then the longest sequence, then the name): the chart's."""
    ok = runs[(runs["status"] == "ok") & np.isfinite(runs["steps_per_s"].astype(float))]
    if ok.empty:
        return None
    stats = ok.groupby("task").agg(n_att=("attention", "nunique"), n=("seq_len", "max")).reset_index()
    return str(stats.sort_values(["n_att", "n", "task"], ascending=[False, False, True]).iloc[0]["task"])


def cells_from_runs(runs: pd.DataFrame, profile: str | None) -> pd.DataFrame:
    """Benchmark-cell-shaped rows (one per attention) from the ok, non-synthetic records of ``profile`` on the task
    :func:`pick_task` chooses: median steps/s and peak memory over seeds, quartiles of the step time over seeds."""
    kept = scored_runs(runs, profile)
    if kept.empty:
        return pd.DataFrame()
    task = pick_task(kept)
    if task is None:
        return pd.DataFrame()
    ok = kept[(kept["task"] == task) & (kept["status"] == "ok") & np.isfinite(kept["steps_per_s"].astype(float))]
    rows = []
    for att, g in ok.groupby("attention"):
        step_s = 1.0 / g["steps_per_s"].astype(float)
        several = len(g) > 1
        rows.append({
            "attention": att, "mode": "model", "status": "ok", "task": task, "profile": str(g["profile"].iloc[0]),
            "device": str(g["device"].mode().iloc[0]), "batch": int(g["batch_size"].mode().iloc[0]),
            "n": int(g["seq_len"].max()), "steps_per_s": float(1.0 / step_s.median()),
            "median_s": float(step_s.median()), "q1_s": float(step_s.quantile(0.25)) if several else np.nan,
            "q3_s": float(step_s.quantile(0.75)) if several else np.nan,
            "memory_bytes": float(g["peak_bytes"].astype(float).median()), "repeats": len(g),
            "created_at": str(g["finished_at"].max()), "source": SOURCE,
        })
    cells = pd.DataFrame(rows)
    if cells.empty:
        return cells
    # one device and one batch size on the axis: the others are named as left out, never mixed in silently
    device, batch = cells.groupby(["device", "batch"]).size().sort_values(ascending=False).index[0]
    same = (cells["device"] == device) & (cells["batch"] == batch)
    left_out = {r.attention: f"trained on {r.device} with batch {r.batch}, unlike the rest ({device}, batch {batch})"
                for r in cells[~same].itertuples()}
    cells = cells[same].reset_index(drop=True)
    cells.attrs[LEFT_OUT] = left_out
    return cells


def draw_with_speed(draw: Callable[[pd.DataFrame], T], cells: pd.DataFrame, runs: pd.DataFrame,
                    profile: str | None) -> tuple[T, str]:
    """``draw(speed)`` with the benchmark cells as the speed, or the run records' own when there are no cells or the
    cells give no point (every one timed while other work used the cores, none at the profile's setting). Returns
    what ``draw`` made and why the records stood in for the cells ('' when they did not). ValueError when neither
    source can be drawn, with both reasons."""
    if cells.empty:
        return draw(cells_from_runs(runs, profile)), ""
    try:
        return draw(cells), ""
    except ValueError as from_cells:
        records = cells_from_runs(runs, profile)
        if records.empty:
            raise
        try:
            return draw(records), str(from_cells)
        except ValueError as from_records:
            raise ValueError(f"{from_cells}; from the run records' own speed: {from_records}") from from_records
