"""Per-task test accuracy bars: one panel per LRA task that was run, one bar per attention (mean over ok seeds,
error bar = its 95 % interval as in Table 1 -- over seeds and test examples, or with one seed the test sample's
alone --, dots = the individual seeds, violet crosses = the collapsed ones), OOM / DIV / FAIL written where no run
succeeded, the paper's Table 1 value as a red tick and the test set's majority-class rate as a dashed line; a task
at chance for every variant says so in its panel title.

The title names the profile and the seeds found in the records; the legend (below the panels, outside them) holds
only the marks that are drawn; each panel's y axis runs from 0 to just above its bars, intervals, seeds and the
paper's ticks; a majority-class rate above that is named at the top edge, not drawn. Colours: one per mixer, the same
in every figure (:data:`lra_bench.reports.figures.PALETTE`).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from lra_bench.reports import paper
from lra_bench.reports.figures import fitted_limits, mixer_color, save_png_svg, seeds_text
from lra_bench.reports.table1 import (
    BINOMIAL,
    BOTH,
    FAIL_LABELS,
    ONE_SEED,
    SEEDS_ONLY,
    TASK_LABELS,
    TASKS,
    attention_order,
    pick_profile,
    task_cells,
)

#: what each kind of cell interval is over, for the legend
INTERVAL_WORDS = {BOTH: "over seeds and test examples", BINOMIAL: "over seeds and binomial test sampling",
                  SEEDS_ONLY: "over seeds only", ONE_SEED: "with 1 seed: test sampling only (Wilson)"}
LEGEND_IN = 0.75  # inches below the panels for the legend


def per_cell_text(counts) -> str:
    """"3 per bar" / "1 to 3 per bar" from the cells' numbers of ok seeds."""
    counts = sorted({int(n) for n in counts if n > 0})
    return f"{counts[0]} per bar" if len(counts) == 1 else f"{counts[0]} to {counts[-1]} per bar"


def accuracy_plots(runs: pd.DataFrame, path: Path | str | None = None, profile: str | None = None,
                   paper_marks: bool = True, title: str | None = None, cells: pd.DataFrame | None = None):
    """One figure, a panel per task with records; saves ``path`` (PNG) and the SVG beside it when given.

    ``runs`` is :func:`lra_bench.reports.table1.load_runs`'s frame; ``profile`` defaults to
    :func:`pick_profile`'s choice. The plotted bars are in ``fig.accuracy_data`` (profile, attention, task,
    mean, std, lo, hi, n, seeds, failures, collapsed, at_chance). Raises ValueError when there is no non-synthetic
    record. ``cells``: :func:`task_cells` of ``runs`` (any profiles) when the caller has them already.
    """
    profile = profile or pick_profile(runs)
    if profile is None:
        cells = pd.DataFrame()
    elif cells is None:
        cells = task_cells(runs, profile)
    else:
        cells = cells[cells.profile == profile]
    if cells.empty:
        raise ValueError(f"no non-synthetic run records{f' for profile {profile!r}' if profile else ''}")
    tasks = [t for t in TASKS if t in set(cells.task)]
    ncols = min(3, len(tasks))
    nrows = math.ceil(len(tasks) / ncols)
    # at least 11 inches wide: the title must fit even over one panel
    fig, axes = plt.subplots(nrows, ncols, figsize=(max(5.2 * ncols, 11.0), 4.2 * nrows + LEGEND_IN),
                             squeeze=False)
    names = attention_order(cells.attention.unique())
    drawn = {"collapsed": False, "paper": False, "majority": False}
    for ax, task in zip(axes.flat, tasks, strict=False):
        tc = cells[cells.task == task].set_index("attention")
        order = [a for a in names if a in tc.index]
        pos = np.arange(len(order))
        means = np.array([tc.loc[a, "mean"] for a in order], float)
        lows = np.array([tc.loc[a, "lo"] for a in order], float)
        highs = np.array([tc.loc[a, "hi"] for a in order], float)
        yerr = np.nan_to_num([means - lows, highs - means])
        ax.bar(pos, np.nan_to_num(means), yerr=yerr, color=[mixer_color(a) for a in order], alpha=0.75, capsize=4,
               edgecolor="black", linewidth=0.6, error_kw={"lw": 1})
        shown = [0.0, *means, *highs]  # what the y axis must hold
        for i, a in enumerate(order):
            accs = tc.loc[a, "accs"]
            if accs:
                down = np.asarray(tc.loc[a, "collapsed_seeds"], bool)
                values = np.asarray(accs, float)
                shown += list(values)
                ax.plot([i] * int((~down).sum()), values[~down], "o", color="black", ms=3, zorder=4)
                ax.plot([i] * int(down.sum()), values[down], "x", color="darkviolet", ms=5, mew=1.5, zorder=4)
                drawn["collapsed"] |= bool(down.any())
            elif tc.loc[a, "failures"]:
                text = "/".join(FAIL_LABELS[s] for s in FAIL_LABELS if s in tc.loc[a, "failures"])
                ax.text(i, 1, text, ha="center", va="bottom", rotation=90, fontsize=8, color="firebrick")
            ref = paper.TABLE1.get(a)
            if paper_marks and ref and task in paper.TASKS:
                ax.plot(i, ref[paper.TASKS.index(task)], marker="_", color="crimson", ms=18, mew=2, zorder=5)
                shown.append(ref[paper.TASKS.index(task)])
                drawn["paper"] = True
        # no successful run in the panel (only OOM / DIV / FAIL): the full scale
        top = fitted_limits(shown, pad=0.06)[1] if np.isfinite(shown[1:]).any() else 100.0
        ax.set_ylim(0, min(top, 100.0))
        majority = tc["majority"].dropna()
        if len(majority):
            level = float(majority.mean())
            if level <= top:
                ax.axhline(level, ls="--", color="gray", lw=1)
            else:  # a reference level, not a limit: named at the edge
                ax.text(0.01, 0.98, f"↑ majority-class rate {level:.1f} % (above the axis)", transform=ax.transAxes,
                        ha="left", va="top", fontsize=7.5, color="dimgray")
            drawn["majority"] = True
        ax.set_xticks(pos, order, rotation=45, ha="right", fontsize=8)
        chance = bool(tc["at_chance"].all())
        ax.set_title(TASK_LABELS.get(task, task) + (" (every variant at chance:\nleft out of the LRA average)"
                                                     if chance else ""), fontsize=10 if chance else None)
        ax.set_ylabel("test accuracy (%)")
        ax.grid(True, axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(tasks):]:
        ax.set_visible(False)
    ok = cells[cells.n > 0]
    found = seeds_text(s for seeds in ok.seeds for s in seeds) if len(ok) else "no ok seed"
    fig.suptitle(title or f"Test accuracy per task, profile {profile}, {found} ({per_cell_text(ok.n)})",
                 fontsize=11)
    several = bool((ok.n > 1).any())
    kinds = [INTERVAL_WORDS[k] for k in INTERVAL_WORDS if k in set(ok.interval)]
    handles = [Patch(facecolor="lightgray", edgecolor="black", label="bar: mean over the seeds" if several else
                     "bar: the seed's test accuracy"),
               Line2D([], [], color="black", marker="|", ms=10, ls="none",
                      label="error bar: 95 % interval " + "; ".join(kinds)),
               Line2D([], [], color="black", marker="o", ms=3, ls="none", label="dot: one seed")]
    if drawn["collapsed"]:
        handles.append(Line2D([], [], color="darkviolet", marker="x", ms=5, mew=1.5, ls="none",
                              label="x: a collapsed seed (one predicted class, or within its interval of the "
                                    "majority rate)"))
    if drawn["paper"]:
        handles.append(Line2D([], [], color="crimson", marker="_", ms=14, mew=2, ls="none",
                              label="the paper's Table 1 (Tay et al. 2020)"))
    if drawn["majority"]:
        handles.append(Line2D([], [], color="gray", ls="--", lw=1, label="majority-class rate of the test set"))
    fig.tight_layout(rect=(0, LEGEND_IN / fig.get_figheight(), 1, 1))
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False, bbox_to_anchor=(0.5, 0.0))
    fig.accuracy_data = cells[["profile", "attention", "task", "mean", "std", "lo", "hi", "n", "seeds", "failures",
                               "collapsed", "at_chance"]].copy()
    if path is not None:
        save_png_svg(fig, path, dpi=110)
    return fig
