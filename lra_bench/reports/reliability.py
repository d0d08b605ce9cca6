"""Rank reliability for REPORT.md: per task (and profile), Kendall's tau between the rankings of the variants that
two disjoint halves of the seeds give (:mod:`lra_bench.stats.rank_reliability`) -- how reproducible the ranking
itself is, beside the per-cell intervals of Table 1."""

from __future__ import annotations

import math

import pandas as pd

from lra_bench.reports.table1 import TASK_LABELS, TASKS
from lra_bench.stats.rank_reliability import half_tau


def rank_reliability(cells: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Rows profile, task, tau, variants, seeds from :func:`lra_bench.reports.table1.task_cells`, and Markdown."""
    rows = []
    for (prof, task), g in cells[cells.n > 0].groupby(["profile", "task"], sort=True):
        accs = {r.attention: dict(zip(r.seeds, r.accs, strict=True)) for r in g.itertuples()}
        tau, k, which = half_tau(accs)
        rows.append({"profile": prof, "task": task, "tau": tau, "variants": k, "seeds": which})
    table = pd.DataFrame(rows, columns=["profile", "task", "tau", "variants", "seeds"])
    if not table.empty:
        table = table.sort_values(["profile", "task"], key=lambda c: c.map(
            {t: i for i, t in enumerate(TASKS)}) if c.name == "task" else c).reset_index(drop=True)
    head = ("**Rank reliability**: per task, Kendall's tau (tau-b, ties counted) between the rankings of the "
            "variants by the first half of their seeds and by the other half (seeds sorted; with 2 seeds, seed by "
            "seed). 1 = the same order, 0 = unrelated: a ranking that seed noise decides has tau near 0.\n")
    if table.empty or (table.tau.isna() & (table.variants < 3)).all():
        return table, head + ("\nNot computable here: it needs 3 or more variants with 2 or more common seeds per "
                              "task.\n")
    shown = pd.DataFrame({"profile": table.profile, "task": table.task.map(TASK_LABELS),
                          "Kendall's tau": [f"{t:.2f}" if math.isfinite(t) else "n/a" for t in table.tau],
                          "variants ranked": table.variants, "seeds compared": table.seeds})
    return table, head + "\n" + shown.to_markdown(index=False, disable_numparse=True) + "\n"
