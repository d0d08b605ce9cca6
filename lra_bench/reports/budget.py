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
    """(last step, validation accuracy there, its gain over the last quarter) in points. The accuracy at three
    quarters of the last step is the evaluation there or, between two evaluations (``profile=cpu``'s ListOps: 3,000
    steps, every 300), the straight line between them; the gain is NaN when the run has no evaluation before three
    quarters."""
    c = curve(evals)
    steps = int(c.index.max())
    quarter = steps * 3 // 4
    if quarter in c.index:
        return steps, float(c[steps]), float(c[steps] - c[quarter])
    if c.index.min() > quarter:
        return steps, float(c[steps]), math.nan
    at_quarter = float(np.interp(quarter, c.index.to_numpy(float), c.to_numpy(float)))
    return steps, float(c[steps]), float(c[steps] - at_quarter)


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


def over_mixers(table: pd.DataFrame) -> pd.DataFrame:
    """Rows (task, steps, mixers, gain, lo, hi, largest, largest_gain) from :func:`last_quarter_table`: per task and
    budget, the mean over mixers of their mean gains with its 95 % t interval over the mixers (a mixer's seeds share
    its effect, so the mixers, not the runs, are the independent units), and the mixer whose mean gain is largest."""
    rows = []
    for (task, steps), g in table.groupby(["task", "steps"], sort=False):
        m, lo, hi, _ = t_interval(g.gain) if len(g) >= 2 else (float(g.gain.iloc[0]), math.nan, math.nan, math.nan)
        top = g.loc[g.gain.idxmax()]
        rows.append({"task": task, "steps": int(steps), "mixers": len(g), "gain": m, "lo": lo, "hi": hi,
                     "largest": top.attention, "largest_gain": float(top.gain)})
    return pd.DataFrame(rows, columns=["task", "steps", "mixers", "gain", "lo", "hi", "largest", "largest_gain"])


def over_mixers_markdown(summary: pd.DataFrame) -> str:
    """:func:`over_mixers` as a Markdown table (points)."""
    shown = [{"task": TASK_LABELS.get(r.task, r.task), "budget (steps)": f"{r.steps:,}",
              "last quarter": f"{r.steps * 3 // 4:,} to {r.steps:,}", "mixers": r.mixers,
              "gain, mean over mixers [95 %]": f"{r.gain:+.2f}" + (f" [{r.lo:+.2f}, {r.hi:+.2f}]"
                                                                   if math.isfinite(r.lo) else ""),
              "largest (mixer's mean)": f"{r.largest} {r.largest_gain:+.2f}"} for r in summary.itertuples()]
    return pd.DataFrame(shown).to_markdown(index=False, disable_numparse=True)
