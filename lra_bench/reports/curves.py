"""Validation accuracy during training, from the ``evals`` of the run records: one panel per task, one line per
attention (the mean over its ok seeds; the seeds themselves faint when there are several), named in a column beside
the panel at the height where it ends; the test set's majority-class rate dashed and the paper's Transformer test
accuracy dotted -- the evidence to read beside a Table 1 cell that is far from the paper's (still rising? flat at
chance? overfitting after a peak?).

Each panel's y axis is fitted to its curves; a reference level outside it is not drawn but named at the edge of the
column (↑ / ↓). The title names the profile and the seeds found; the legend of line kinds sits below the panels.
Colours: one per mixer, the same in every figure (:data:`lra_bench.reports.figures.PALETTE`).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from lra_bench.reports import paper
from lra_bench.reports.figures import fitted_limits, mixer_color, save_png_svg, seeds_text
from lra_bench.reports.labels import COLUMN_GAP_PT, column, column_height_pt, text_size
from lra_bench.reports.table1 import TASK_LABELS, TASKS, attention_order, scored_runs

FONT = 7.0  # the names beside the panels
PANEL_W, LEFT, GAP, TOP, BOTTOM = 5.0, 0.75, 0.75, 0.8, 0.95  # inches: panel width and the margins around them
ROW_GAP = 0.85  # inches between two rows of panels: the x label of one, the title of the next
MIN_WIDTH = 10.0  # inches: the title fits over a single panel


def curve(evals: list[dict]) -> pd.Series:
    """(step -> validation accuracy %) of one run."""
    return pd.Series({int(e["step"]): 100 * float(e["val_acc"]) for e in evals}, dtype=float).sort_index()


def _counts_text(counts) -> str:
    counts = sorted(set(counts))
    return (f"{counts[0]} seed" + ("s" if counts[0] > 1 else "") if len(counts) == 1
            else f"{counts[0]} to {counts[-1]} seeds")


def val_curves(runs: pd.DataFrame, path: Path | str | None = None, profile: str | None = None,
               title: str | None = None):
    """The figure (``fig.curve_data``: attention, task, step, mean val acc %, seeds); saves PNG + SVG at ``path``.

    Raises ValueError when no ok run of ``profile`` has evaluations.
    """
    sub = scored_runs(runs, profile)
    sub = sub[(sub.status == "ok") & sub.evals.map(lambda e: isinstance(e, list) and len(e) > 0)]
    tasks = [t for t in TASKS if t in set(sub.task)]
    if not tasks:
        raise ValueError(f"no ok run with evaluations (profile {profile})")
    names = max(sub.groupby("task").attention.nunique()) + 2  # the names beside the fullest panel, 2 references
    panel_h = max(3.4, column_height_pt(names, FONT) / 72)
    probe = Figure().add_subplot()  # measures the names before the figure is laid out (not pyplot's: never shown)
    label_w = max(text_size(probe, f"↑ {t}", FONT)[0] / probe.figure.dpi for t in [
        *sub.attention.unique(), "majority class (test) 100.0 %", "paper Transformer (test) 100.0 %"])
    col_w = COLUMN_GAP_PT / 72 + label_w + 0.1
    ncols = min(2, len(tasks))  # two panels a row: wide enough to read, each with its column of names
    nrows = -(-len(tasks) // ncols)
    width = max(LEFT + ncols * (PANEL_W + col_w) + (ncols - 1) * GAP, MIN_WIDTH)
    fig = plt.figure(figsize=(width, TOP + nrows * panel_h + (nrows - 1) * ROW_GAP + BOTTOM))
    w_in, h_in = fig.get_figwidth(), fig.get_figheight()
    axes = [fig.add_axes(((LEFT + (i % ncols) * (PANEL_W + col_w + GAP)) / w_in,
                          (BOTTOM + (nrows - 1 - i // ncols) * (panel_h + ROW_GAP)) / h_in, PANEL_W / w_in,
                          panel_h / h_in)) for i in range(len(tasks))]
    rows, columns = [], []
    for ax, task in zip(axes, tasks, strict=True):
        g = sub[sub.task == task]
        values, entries = [], []
        for attention in attention_order(set(g.attention)):
            seeds = [curve(e) for e in g[g.attention == attention].evals]
            table = pd.concat(seeds, axis=1)  # (steps, seeds)
            mean = table.mean(axis=1)
            color = mixer_color(attention)
            if len(seeds) > 1:
                for _, s in table.items():
                    ax.plot(s.index, s.values, color=color, lw=0.7, alpha=0.3)
                    values += list(s.values)
            ax.plot(mean.index, mean.values, color=color, lw=1.6, gid=attention)
            values += list(mean.values)
            end = mean.dropna()
            entries.append({"text": attention, "color": color, "x": float(end.index[-1]), "y": float(end.iloc[-1])})
            rows += [{"attention": attention, "task": task, "step": int(step), "val_acc": float(v),
                      "seeds": len(seeds)} for step, v in mean.items()]
        low, high = fitted_limits(values, pad=0.05, least=0.5)
        ax.set_ylim(low, high)
        steps = sorted({r["step"] for r in rows if r["task"] == task})
        if len(steps) > 1:
            ax.set_xlim(steps[0], steps[-1])
        levels = []
        majority = g.test_majority_rate.dropna()
        if not majority.empty:
            levels.append(("majority class (test)", 100 * majority.mean(), "grey", "--", "majority"))
        if task in paper.TASKS:
            levels.append(("paper Transformer (test)", paper.paper_task_score("softmax", task), "black", ":", "paper"))
        for name, level, color, style, gid in levels:
            if low <= level <= high:
                ax.axhline(level, ls=style, color=color, lw=1, gid=gid)
                entries.append({"text": f"{name} {level:.1f} %", "color": color, "x": None, "y": level})
            else:  # a reference level, not a limit: named at the edge
                arrow = "↑" if level > high else "↓"
                entries.append({"text": f"{arrow} {name} {level:.1f} %", "color": color, "x": None, "y": level})
        counts = {r["seeds"] for r in rows if r["task"] == task}
        ax.set_title(TASK_LABELS.get(task, task) + ("" if len({r["seeds"] for r in rows}) == 1
                                                     else f" ({_counts_text(counts)} per variant)"), fontsize=10)
        ax.set_xlabel("training step")
        ax.grid(True, alpha=0.3)
        columns.append((ax, entries))
    for ax in axes[::ncols]:
        ax.set_ylabel("validation accuracy (%)")
    for ax, entries in columns:
        column(ax, entries, FONT)
    counts = [r["seeds"] for r in rows]
    found = seeds_text(sub.seed)
    fig.suptitle(title or f"Validation accuracy during training, profile {profile}, {found} "
                 f"({_counts_text(counts)} per variant)", y=1 - 0.25 / h_in, va="top")
    kinds = [Line2D([], [], color="dimgray", lw=1.6, label="mean over the seeds" if max(counts) > 1
                    else "the seed's validation accuracy")]
    if max(counts) > 1:
        kinds.append(Line2D([], [], color="dimgray", lw=0.7, alpha=0.5, label="one seed"))
    kinds += [Line2D([], [], color="grey", ls="--", lw=1, label="majority class of the test set"),
              Line2D([], [], color="black", ls=":", lw=1, label="paper's Transformer, test accuracy (Tay et al. 2020)")]
    fig.legend(handles=kinds, loc="lower center", ncol=len(kinds), fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 0.0))
    fig.curve_data = pd.DataFrame(rows)
    if path is not None:
        save_png_svg(fig, path, dpi=110)
    return fig
