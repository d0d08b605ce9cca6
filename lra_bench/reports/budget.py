"""Is a budget at a plateau? From runs trained past it with frequent evaluations: per task and mixer, validation
accuracy at the last evaluation minus at three quarters of the budget (the last quarter's gain), the mean over seeds
with its 95 % t interval, beside the task's detectable gap: a budget whose last quarter gains less than the gap
the table can detect is at a plateau for that table.

The runs are the budget study's (docs/benchmark.md, "Budgets"): ``profile=quick`` with ``trainer.max_steps`` a
multiple of the profile's and ``trainer.eval_every`` a sixteenth of it. The gain is taken at each run's own last
step (its schedule ends there: a point inside a longer cosine run is not what a shorter run would reach).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from lra_bench.reports.curves import curve
from lra_bench.reports.tasks import TASK_LABELS, TASKS
from lra_bench.stats.intervals import t_interval


def last_quarter_gain(evals: list[dict]) -> tuple[int, float, float]:
    """(last step, validation accuracy there, its gain over the last quarter) in points; the gain is NaN when the run
    did not evaluate at three quarters of its last step."""
    c = curve(evals)
    steps = int(c.index.max())
    quarter = steps * 3 // 4
    return steps, float(c[steps]), float(c[steps] - c[quarter]) if quarter in c.index else math.nan


def last_quarter_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Rows (task, attention, steps, seeds, gain, lo, hi, at_end): per task, mixer and budget (the runs' last step),
    the last quarter's gain over the ok runs that evaluated at both points, mean and 95 % t interval (NaN with one
    seed), and the mean validation accuracy at the budget."""
    rows = []
    ok = runs[(runs.status == "ok") & runs.evals.map(lambda e: isinstance(e, list) and len(e) > 1)]
    rows_in = []
    for r in ok.itertuples():
        steps, at_end, gain = last_quarter_gain(r.evals)
        rows_in.append({"task": r.task, "attention": r.attention, "steps": steps, "at_end": at_end, "gain": gain})
    found = pd.DataFrame(rows_in)
    if found.empty:
        return found
    found = found[np.isfinite(found.gain)]
    for (task, attention, steps), g in found.groupby(["task", "attention", "steps"]):
        gains = list(g.gain)
        m, lo, hi, _ = t_interval(gains) if len(gains) >= 2 else (gains[0], math.nan, math.nan, math.nan)
        rows.append({"task": task, "attention": attention, "steps": int(steps), "seeds": len(gains), "gain": m,
                     "lo": lo, "hi": hi, "at_end": float(g.at_end.mean())})
    out = pd.DataFrame(rows)
    order = {t: i for i, t in enumerate(TASKS)}
    return out.sort_values(["task", "attention", "steps"], key=lambda c: c.map(order) if c.name == "task" else c,
                           ignore_index=True)


def last_quarter_markdown(table: pd.DataFrame, gaps: dict[str, float]) -> str:
    """The table in points, with each task's detectable gap and whether the gain's upper bound is below it."""
    shown = []
    for r in table.itertuples():
        gap = gaps.get(r.task, math.nan)
        interval = f"[{r.lo:+.2f}, {r.hi:+.2f}]" if math.isfinite(r.lo) else "(one seed)"
        verdict = ("below the gap (upper bound)" if math.isfinite(r.hi) and r.hi < gap else
                   "not shown below the gap" if math.isfinite(gap) else "no gap to compare")
        shown.append({"task": TASK_LABELS.get(r.task, r.task), "mixer": r.attention, "budget (steps)": f"{r.steps:,}",
                      "seeds": r.seeds, "val acc at budget": f"{r.at_end:.2f}",
                      "last-quarter gain": f"{r.gain:+.2f} {interval}",
                      "detectable gap": f"{gap:.1f}" if math.isfinite(gap) else "-", "plateau?": verdict})
    return pd.DataFrame(shown).to_markdown(index=False, disable_numparse=True)
