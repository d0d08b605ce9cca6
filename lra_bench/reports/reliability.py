"""Rank reliability for REPORT.md: per task (and profile), how reproducible the ranking of the variants is
(:mod:`lra_bench.stats.rank_reliability`) -- Kendall's tau between seed halves averaged over every split of the
seeds with its interval, the reliability of the k-seed mean, and the chance that a rerun keeps the same top-1 and
the same top-3 set -- beside the per-cell intervals of Table 1."""

from __future__ import annotations

import math

import pandas as pd

from lra_bench.reports.same_predictions import drop_repeats
from lra_bench.reports.tasks import TASK_LABELS, TASKS
from lra_bench.stats.rank_reliability import mean_reliability, same_top, split_tau

COLUMNS = ["profile", "task", "tau", "tau_lo", "tau_hi", "splits", "reliability", "reliability_lo", "reliability_hi",
           "same_top1", "same_top3", "variants", "k", "seeds", "at_chance"]


def _fmt(v: float, lo: float = math.nan, hi: float = math.nan) -> str:
    if not math.isfinite(v):
        return "n/a"
    return f"{v:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if math.isfinite(lo) and math.isfinite(hi) else "")


def rank_reliability(cells: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Rows of ``COLUMNS`` from :func:`lra_bench.reports.table1.task_cells`, and Markdown. One result under several
    names (:mod:`lra_bench.reports.same_predictions`) is one variant here: its copies would agree with each other in
    every split and inflate tau and the reliability."""
    rows = []
    for (prof, task), g in drop_repeats(cells[cells.n > 0]).groupby(["profile", "task"], sort=True):
        accs = {r.attention: dict(zip(r.seeds, r.accs, strict=True)) for r in g.itertuples()}
        tau = split_tau(accs)
        rel = mean_reliability(accs)
        top1, top3 = same_top(accs)
        seeds = (f"{tau['seeds']}" + (f" ({', '.join(tau['left_out'])} left out: other seeds)" if tau["left_out"]
                                      else "")) if tau["seeds"] else "needs >= 3 variants sharing >= 2 seeds"
        rows.append({"profile": prof, "task": task, "tau": tau["tau"], "tau_lo": tau["low"], "tau_hi": tau["high"],
                     "splits": tau["splits"], "reliability": rel["icc"], "reliability_lo": rel["low"],
                     "reliability_hi": rel["high"], "same_top1": top1, "same_top3": top3,
                     "variants": tau["variants"], "k": len(tau["seeds"]), "seeds": seeds,
                     "at_chance": bool(g.at_chance.all())})
    table = pd.DataFrame(rows, columns=COLUMNS)
    if not table.empty:
        table = table.sort_values(["profile", "task"], key=lambda c: c.map(
            {t: i for i, t in enumerate(TASKS)}) if c.name == "task" else c).reset_index(drop=True)
    ks = set(table.k[table.k >= 2]) if not table.empty else set()
    mean_of = f"{ks.pop()}-seed mean" if len(ks) == 1 else "k-seed mean"
    head = ("**Rank reliability**, per task: Kendall's tau (tau-b) between the rankings of the variants by two "
            "disjoint halves of their seeds, averaged over every split of the seeds into halves (which seed goes "
            "where changes a single split's tau a lot), with a 95 % jackknife interval over variants (1 = the same "
            "order, 0 = unrelated: a ranking that seed noise decides has tau near 0); the reliability of the "
            f"{mean_of} (ICC(1, k): the share of the variance of the variants' means that is real difference "
            "between them, exact F interval); and P(same top-1) / P(same top-3 set), the chance that two reruns "
            "with new seeds on the same test set agree on the best variant / on the set of the best three "
            "(simulated from the empirical-Bayes posterior of the variants' means). Variants with the same "
            "predictions on every example and seed count as one.\n")
    if table.empty or (table.tau.isna() & (table.variants < 3)).all():
        return table, head + ("\nNot computable here: it needs 3 or more variants with 2 or more common seeds per "
                              "task.\n")
    shown = pd.DataFrame({
        "profile": table.profile,
        "task": [TASK_LABELS.get(t, t) + (" (at chance)" if c else "") for t, c in zip(table.task, table.at_chance,
                                                                                      strict=True)],
        "Kendall's tau [95 %]": [_fmt(r.tau, r.tau_lo, r.tau_hi) for r in table.itertuples()],
        "splits": table.splits,
        f"reliability of the {mean_of} [95 %]": [_fmt(r.reliability, r.reliability_lo, r.reliability_hi)
                                                 for r in table.itertuples()],
        "P(same top-1)": [_fmt(v) for v in table.same_top1], "P(same top-3 set)": [_fmt(v) for v in table.same_top3],
        "variants": table.variants, "seeds": table.seeds})
    return table, head + "\n" + shown.to_markdown(index=False, disable_numparse=True) + "\n"
