"""Validation accuracy during training, from the ``evals`` of the run records: one panel per task, one line per
attention (the mean over its ok seeds; the seeds themselves faint when there are several), the test set's
majority-class rate dashed and the paper's Transformer test accuracy dotted — the evidence to read beside a
Table 1 cell that is far from the paper's (still rising? flat at chance? overfitting after a peak?).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from lra_bench.reports import paper
from lra_bench.reports.figures import save_png_svg
from lra_bench.reports.table1 import TASK_LABELS, TASKS, attention_color, attention_order, scored_runs


def curve(evals: list[dict]) -> pd.Series:
    """(step -> validation accuracy %) of one run."""
    return pd.Series({int(e["step"]): 100 * float(e["val_acc"]) for e in evals}, dtype=float).sort_index()


STYLES = ("-", "--", ":")


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
    ncol = 1 + (sub.attention.nunique() + 2) // 16  # legend columns (every attention, majority, paper)
    legend_in = 2.1 * ncol  # inches kept right of the panels for the legend
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.2 * len(tasks) + legend_in, 4.8), squeeze=False)
    rows = []
    for ax, task in zip(axes[0], tasks, strict=True):
        g = sub[sub.task == task]
        for i, attention in enumerate(attention_order(set(g.attention))):
            seeds = [curve(e) for e in g[g.attention == attention].evals]
            table = pd.concat(seeds, axis=1)  # (steps, seeds)
            mean = table.mean(axis=1)
            color = attention_color(attention)
            if len(seeds) > 1:
                for _, s in table.items():
                    ax.plot(s.index, s.values, color=color, lw=0.7, alpha=0.3)
            style = STYLES[i // 10 % len(STYLES)]  # colours repeat past 20 names: the line style tells them apart
            ax.plot(mean.index, mean.values, color=color, lw=1.6, ls=style, label=attention)  # one legend entry
            # per variant across the panels: the seed counts go in each panel's title
            rows += [{"attention": attention, "task": task, "step": int(step), "val_acc": float(v),
                      "seeds": len(seeds)} for step, v in mean.items()]
        majority = g.test_majority_rate.dropna()
        if not majority.empty:
            ax.axhline(100 * majority.mean(), ls="--", color="grey", lw=1, label="majority class (test)")
        if task in paper.TASKS:
            ax.axhline(paper.paper_task_score("softmax", task), ls=":", color="black", lw=1,
                       label="paper Transformer (test)")
        counts = sorted({r["seeds"] for r in rows if r["task"] == task})
        seeds_text = (f"{counts[0]} seed" + ("s" if counts[0] > 1 else "") if len(counts) == 1
                      else f"{counts[0]} to {counts[-1]} seeds")
        ax.set_title(f"{TASK_LABELS.get(task, task)} ({seeds_text} per variant"
                     + ("; thick = mean, thin = each seed)" if counts[-1] > 1 else ")"), fontsize=9)
        ax.set_xlabel("training step")
        ax.set_ylabel("validation accuracy (%)")
        ax.grid(True, alpha=0.3)
    handles: dict[str, object] = {}  # one legend for all panels, outside them: it never covers a curve
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    fig.suptitle(title or f"Validation accuracy during training (profile {profile})")
    fig.tight_layout(rect=(0, 0, 1 - legend_in / fig.get_figwidth(), 1))
    fig.legend(handles.values(), handles.keys(), loc="center right", fontsize=7, ncol=ncol, frameon=False)
    fig.curve_data = pd.DataFrame(rows)
    if path is not None:
        save_png_svg(fig, path, dpi=110)
    return fig
