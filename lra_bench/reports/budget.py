"""Is a budget at a plateau? From runs trained past it with frequent evaluations: per task and mixer, validation
accuracy at the last evaluation minus at three quarters of the budget (the last quarter's gain), the mean over seeds
with its 95 % t interval, beside the task's detectable gap: a budget whose last quarter gains less than the gap
the table can detect is at a plateau for that table.

The runs are the budget study's (docs/benchmark.md, "Budgets": ``profile=quick`` with ``trainer.max_steps`` a
multiple of the profile's and ``trainer.eval_every`` a sixteenth of it), a curated sweep's own records (four
validations per run at the re-sized ``quick``) or ``profile=cpu``'s (every tenth of the budget: three quarters falls
between two validations, and the straight line between them stands in, marked "interpolated"; two validations further
apart than an eighth of the budget give no gain). The gain is taken at each run's own last step (its schedule ends
there: a point inside a longer cosine run is not what a shorter run would reach). :func:`plateau_runs` picks the
records a plateau is judged on: one protocol and profile, one result under several names once, no cell at chance.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from lra_bench.reports.curves import curve
from lra_bench.reports.protocols import report_labels
from lra_bench.reports.same_predictions import drop_repeats
from lra_bench.reports.table1 import REFERENCE, pick_profile, scored_runs, task_cells
from lra_bench.reports.tasks import TASK_LABELS, TASKS
from lra_bench.stats.intervals import t_interval


def last_quarter_gain(evals: list[dict]) -> tuple[int, float, float, bool]:
    """(last step, validation accuracy there, its gain over the last quarter, whether the accuracy at three quarters
    is interpolated) in points. The accuracy at three quarters of the last step is the evaluation there or, between
    two evaluations at most an eighth of the budget apart, the straight line between them; otherwise the gain is
    NaN."""
    c = curve(evals)
    steps = int(c.index.max())
    quarter = steps * 3 // 4
    if quarter in c.index:
        return steps, float(c[steps]), float(c[steps] - c[quarter]), False
    before, after = c.index[c.index < quarter], c.index[c.index > quarter]
    if not len(before) or not len(after) or after.min() - before.max() > steps / 8:
        return steps, float(c[steps]), math.nan, False
    at_quarter = float(np.interp(quarter, [before.max(), after.min()], [c[before.max()], c[after.min()]]))
    return steps, float(c[steps]), float(c[steps] - at_quarter), True


def plateau_runs(runs: pd.DataFrame, protocol: str = "scratch", profile: str | None = None,
                 reference: str = REFERENCE) -> pd.DataFrame:
    """The records a plateau is judged on (:func:`lra_bench.reports.table1.scored_runs` of one ``protocol`` -- a
    report label (:func:`lra_bench.reports.protocols.report_labels`), so that a compute-matched control never stands
    in for the scratch budget -- and ``profile``: not synthetic, the latest record per seed), keeping each result
    under several names once (:mod:`lra_bench.reports.same_predictions`, under ``reference`` where it is one of them)
    and leaving out the cells at chance or with a collapsed run (their curves say nothing about a plateau).
    ``profile`` None: the records' own (:func:`lra_bench.reports.table1.pick_profile`)."""
    if runs.empty:
        return runs
    if "protocol" not in runs.columns:
        mine = runs  # records of one protocol (from before protocols existed)
    else:  # the report's labels: a compute-matched control is "scratch, compute-matched", not "scratch"
        missing = {"pair_key", "ft_steps", "pt_steps"} - set(runs.columns)
        if missing:
            raise ValueError(f"plateau_runs needs the columns of lra_bench.reports.table1.load_runs; missing "
                             f"{sorted(missing)}: pass load_runs(folder)")
        mine = runs[report_labels(runs) == protocol]
    profile = profile or pick_profile(mine)
    if profile is None:
        return mine.iloc[0:0]
    cells = drop_repeats(task_cells(mine, profile), reference)
    kept = {(r.task, r.attention) for r in cells.itertuples() if r.n > 0 and not r.collapsed and not r.at_chance}
    scored = scored_runs(mine, profile)
    return scored[[(t, a) in kept for t, a in zip(scored.task, scored.attention, strict=True)]]


def last_quarter_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Rows (task, attention, steps, seeds, gain, lo, hi, at_end, interpolated): per task, mixer and budget (the runs'
    last step), the last quarter's gain over the ok runs that have one, mean and 95 % t interval (NaN with one seed),
    the mean validation accuracy at the budget, and whether three quarters was interpolated for any seed."""
    rows = []
    ok = runs[(runs.status == "ok") & runs.evals.map(lambda e: isinstance(e, list) and len(e) > 1)]
    rows_in = []
    for r in ok.itertuples():
        steps, at_end, gain, drawn = last_quarter_gain(r.evals)
        rows_in.append({"task": r.task, "attention": r.attention, "steps": steps, "at_end": at_end, "gain": gain,
                        "interpolated": drawn})
    found = pd.DataFrame(rows_in)
    if found.empty:
        return found
    found = found[np.isfinite(found.gain)]
    for (task, attention, steps), g in found.groupby(["task", "attention", "steps"]):
        gains = list(g.gain)
        m, lo, hi, _ = t_interval(gains) if len(gains) >= 2 else (gains[0], math.nan, math.nan, math.nan)
        rows.append({"task": task, "attention": attention, "steps": int(steps), "seeds": len(gains), "gain": m,
                     "lo": lo, "hi": hi, "at_end": float(g.at_end.mean()), "interpolated": bool(g.interpolated.any())})
    out = pd.DataFrame(rows, columns=["task", "attention", "steps", "seeds", "gain", "lo", "hi", "at_end",
                                      "interpolated"])
    order = {t: i for i, t in enumerate(TASKS)}
    return out.sort_values(["task", "attention", "steps"], key=lambda c: c.map(order) if c.name == "task" else c,
                           ignore_index=True)


def last_quarter_markdown(table: pd.DataFrame, gaps: dict[str, float]) -> str:
    """The table in points, with each task's detectable gap and whether the gain's upper bound is below it."""
    shown = []
    for r in table.itertuples():
        gap = gaps.get(r.task, math.nan)
        interval = f"[{r.lo:+.2f}, {r.hi:+.2f}]" if math.isfinite(r.lo) else "(one seed)"
        interval += " (interpolated)" if r.interpolated else ""
        verdict = ("below the gap (upper bound)" if math.isfinite(r.hi) and r.hi < gap else
                   "not shown below the gap" if math.isfinite(gap) else "no gap to compare")
        shown.append({"task": TASK_LABELS.get(r.task, r.task), "mixer": r.attention, "budget (steps)": f"{r.steps:,}",
                      "seeds": r.seeds, "val acc at budget": f"{r.at_end:.2f}",
                      "last-quarter gain": f"{r.gain:+.2f} {interval}",
                      "detectable gap": f"{gap:.1f}" if math.isfinite(gap) else "-", "plateau?": verdict})
    return pd.DataFrame(shown).to_markdown(index=False, disable_numparse=True)


def over_mixers(table: pd.DataFrame) -> pd.DataFrame:
    """Rows (task, steps, results, gain, lo, hi, largest, largest_gain, highest, highest_hi, interpolated) from
    :func:`last_quarter_table` (of :func:`plateau_runs`' records: one result under several names once): per task and
    budget, the mean over the mixers of their mean gains with its 95 % t interval over the mixers (a mixer's seeds
    share its effect, so the mixers are the units, and the interval speaks of mixers like these, not of each one),
    the mixer with the largest mean gain, and the one with the highest upper bound (each mixer's own interval over
    its seeds: the bound that says whether that mixer's budget is at a plateau)."""
    rows = []
    for (task, steps), g in table.groupby(["task", "steps"], sort=False):
        m, lo, hi, _ = t_interval(g.gain) if len(g) >= 2 else (float(g.gain.iloc[0]), math.nan, math.nan, math.nan)
        top = g.loc[g.gain.idxmax()]
        bounded = g[np.isfinite(g.hi)]
        high = bounded.loc[bounded.hi.idxmax()] if len(bounded) else None
        rows.append({"task": task, "steps": int(steps), "results": len(g), "gain": m, "lo": lo, "hi": hi,
                     "largest": top.attention, "largest_gain": float(top.gain),
                     "highest": high.attention if high is not None else "",
                     "highest_hi": float(high.hi) if high is not None else math.nan,
                     "interpolated": bool(g.interpolated.any())})
    return pd.DataFrame(rows, columns=["task", "steps", "results", "gain", "lo", "hi", "largest", "largest_gain",
                                       "highest", "highest_hi", "interpolated"])


def over_mixers_markdown(summary: pd.DataFrame) -> str:
    """:func:`over_mixers` as a Markdown table (points)."""
    shown = [{"task": TASK_LABELS.get(r.task, r.task), "budget (steps)": f"{r.steps:,}",
              "last quarter": f"{r.steps * 3 // 4:,} to {r.steps:,}" + (" (interpolated)" if r.interpolated else ""),
              "results": r.results,
              "gain, mean over mixers [95 %]": f"{r.gain:+.2f}" + (f" [{r.lo:+.2f}, {r.hi:+.2f}]"
                                                                   if math.isfinite(r.lo) else ""),
              "largest mean": f"{r.largest} {r.largest_gain:+.2f}",
              "highest upper bound": f"{r.highest} {r.highest_hi:+.2f}" if r.highest else "-"}
             for r in summary.itertuples()]
    return pd.DataFrame(shown).to_markdown(index=False, disable_numparse=True)
