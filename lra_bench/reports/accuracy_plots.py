"""Per-task test accuracy bars: one panel per LRA task that was run, one bar per attention (mean over ok seeds,
error bar = its 95 % interval as in Table 1 -- over seeds and test examples, or with one seed the test sample's
alone --, dots = the individual seeds, red crosses = the collapsed ones), OOM / DIV / FAIL written where no run
succeeded, the paper's Table 1 value as a red tick and the test set's majority-class rate as a dashed line; a task
at chance for every variant says so in its panel title.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from lra_bench.reports import paper
from lra_bench.reports.figures import save_png_svg
from lra_bench.reports.table1 import (
    FAIL_LABELS,
    TASK_LABELS,
    TASKS,
    attention_color,
    attention_order,
    pick_profile,
    task_cells,
)


def accuracy_plots(runs: pd.DataFrame, path: Path | str | None = None, profile: str | None = None,
                   paper_marks: bool = True, title: str | None = None):
    """One figure, a panel per task with records; saves ``path`` (PNG) and the SVG beside it when given.

    ``runs`` is :func:`lra_bench.reports.table1.load_runs`'s frame; ``profile`` defaults to
    :func:`pick_profile`'s choice. The plotted bars are in ``fig.accuracy_data`` (profile, attention, task,
    mean, std, lo, hi, n, failures, collapsed, at_chance). Raises ValueError when there is no non-synthetic record.
    """
    profile = profile or pick_profile(runs)
    cells = task_cells(runs, profile) if profile is not None else pd.DataFrame()
    if cells.empty:
        raise ValueError(f"no non-synthetic run records{f' for profile {profile!r}' if profile else ''}")
    tasks = [t for t in TASKS if t in set(cells.task)]
    ncols = min(3, len(tasks))
    nrows = math.ceil(len(tasks) / ncols)
    # at least 11 inches wide: the two-line title must fit even over one panel
    fig, axes = plt.subplots(nrows, ncols, figsize=(max(5.2 * ncols, 11.0), 4.2 * nrows), squeeze=False)
    names = attention_order(cells.attention.unique())
    color = {a: attention_color(a) for a in names}
    for ax, task in zip(axes.flat, tasks, strict=False):
        tc = cells[cells.task == task].set_index("attention")
        order = [a for a in names if a in tc.index]
        pos = np.arange(len(order))
        means = np.array([tc.loc[a, "mean"] for a in order], float)
        lows = np.array([tc.loc[a, "lo"] for a in order], float)
        highs = np.array([tc.loc[a, "hi"] for a in order], float)
        yerr = np.nan_to_num([means - lows, highs - means])
        ax.bar(pos, np.nan_to_num(means), yerr=yerr, color=[color[a] for a in order], alpha=0.75, capsize=4,
               edgecolor="black", linewidth=0.6, error_kw={"lw": 1})
        for i, a in enumerate(order):
            accs = tc.loc[a, "accs"]
            if accs:
                down = np.asarray(tc.loc[a, "collapsed_seeds"], bool)
                values = np.asarray(accs, float)
                ax.plot([i] * int((~down).sum()), values[~down], "o", color="black", ms=3, zorder=4)
                ax.plot([i] * int(down.sum()), values[down], "x", color="darkviolet", ms=5, mew=1.5, zorder=4)
            elif tc.loc[a, "failures"]:
                text = "/".join(FAIL_LABELS[s] for s in FAIL_LABELS if s in tc.loc[a, "failures"])
                ax.text(i, 1, text, ha="center", va="bottom", rotation=90, fontsize=8, color="firebrick")
            ref = paper.TABLE1.get(a)
            if paper_marks and ref and task in paper.TASKS:
                ax.plot(i, ref[paper.TASKS.index(task)], marker="_", color="crimson", ms=18, mew=2, zorder=5)
        majority = tc["majority"].dropna()
        if len(majority):
            ax.axhline(majority.mean(), ls="--", color="gray", lw=1)
        ax.set_xticks(pos, order, rotation=45, ha="right", fontsize=8)
        chance = bool(tc["at_chance"].all())
        ax.set_title(TASK_LABELS.get(task, task) + (" (every variant at chance:\nleft out of the LRA average)"
                                                     if chance else ""), fontsize=10 if chance else None)
        ax.set_ylabel("test accuracy (%)")
        ax.set_ylim(0, 100)
        ax.grid(True, axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(tasks):]:
        ax.set_visible(False)
    seeds = sorted({int(n) for n in cells.n if n > 0})
    seeds_text = (f"{seeds[0]} seed{'s' if seeds[0] > 1 else ''}" if len(seeds) == 1
                  else f"{seeds[0]} to {seeds[-1]} seeds") + " per bar"
    one = " (1 seed: test sampling only)" if 1 in seeds else ""
    fig.suptitle(title or f"Test accuracy per task, profile {profile}, {seeds_text}: bar = mean over seeds, error bar "
                 f"= 95 % interval over seeds and test examples{one}, dots = seeds;\nviolet x = a collapsed seed (one "
                 "predicted class, or within its interval of the majority rate), red tick = the paper's Table 1, "
                 "dashed = majority-class rate", fontsize=10)
    fig.tight_layout()
    fig.accuracy_data = cells[["profile", "attention", "task", "mean", "std", "lo", "hi", "n", "failures",
                               "collapsed", "at_chance"]].copy()
    if path is not None:
        save_png_svg(fig, path, dpi=110)
    return fig
