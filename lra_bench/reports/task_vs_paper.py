"""One task's column of LRA Table 1 beside the paper's: our accuracy, the paper's, the difference per row and the
rank agreement over the paper's rows -- what a first paper-scale sweep of a single task (e.g. ListOps on one GPU)
can be checked against before the other four tasks exist.
"""

from __future__ import annotations

import math

import pandas as pd

from lra_bench.reports import paper
from lra_bench.reports.efficiency import spearman
from lra_bench.reports.table1 import TASK_LABELS, attention_order, one_profile

#: how this project's attention names read in the paper's Table 1
PAPER_ROW = {att: name for name, att in paper.PAPER_NAMES.items()}


def task_scores(table: pd.DataFrame, task: str, profile: str | None = None) -> pd.DataFrame:
    """attention, profile, score (mean test accuracy % on ``task``), n_tasks (1), params, score_lo / score_hi (its
    95 % interval), best (in the confidence set for the task's best) and p_rank1, seeds and collapsed runs: the
    bubble chart's y. ``attrs``: the task's detectable gap, as :func:`lra_bench.reports.table1.lra_scores`."""
    if task not in paper.TASKS:
        raise ValueError(f"task must be one of {paper.TASKS}, got {task!r}")
    t = one_profile(table, profile)
    t = t[t[f"{task}_n"] > 0] if not t.empty else t
    out = pd.DataFrame({"attention": t.get("attention", []), "profile": t.get("profile", []),
                        "score": t.get(f"{task}_mean", []), "n_tasks": 1, "params": t.get("params", []),
                        "score_lo": t.get(f"{task}_lo", []), "score_hi": t.get(f"{task}_hi", []),
                        "best": t.get(f"{task}_best", []), "p_rank1": t.get(f"{task}_p_rank1", []),
                        "seeds": t.get(f"{task}_n", []), "collapsed": t.get(f"{task}_collapsed", [])})
    verdicts = table.attrs.get("verdicts", {}).get(t.profile.iloc[0] if len(t) else profile, {})
    found = verdicts.get(task, {}).get("detectable")
    out.attrs.update(tasks=[task], left_out=[], detectable={task: found} if found else {},
                     reference=table.attrs.get("reference", "softmax"))
    return out


def task_vs_paper(table: pd.DataFrame, task: str, profile: str | None = None) -> tuple[pd.DataFrame, str]:
    """Rows: attention, the paper's row name, ours (Table 1 cell text), ours_mean, paper, diff (ours - paper, points);
    and the Markdown with Spearman's rank agreement over the paper's rows that both have."""
    if task not in paper.TASKS:
        raise ValueError(f"task must be one of {paper.TASKS}, got {task!r}")
    t = one_profile(table, profile)
    label = TASK_LABELS[task]
    rows = []
    for att in attention_order(t.attention.unique()) if not t.empty else []:
        r = t[t.attention == att].iloc[0]
        theirs = paper.paper_task_score(att, task)
        ours = float(r[f"{task}_mean"])
        rows.append({"attention": att, "paper row": PAPER_ROW.get(att, ""), "ours": r[label], "ours_mean": ours,
                     "paper": theirs if theirs is not None else math.nan,
                     "diff": ours - theirs if theirs is not None and math.isfinite(ours) else math.nan})
    out = pd.DataFrame(rows, columns=["attention", "paper row", "ours", "ours_mean", "paper", "diff"])
    both = out.dropna(subset=["ours_mean", "paper"])
    rho = spearman(both["ours_mean"], both["paper"]) if len(both) >= 3 else math.nan
    missing = sorted(set(paper.TABLE1) - set(both.attention))
    head = (f"**{label} beside the paper** (Tay et al. 2020, Table 1): {len(both)} of its {len(paper.TABLE1)} rows "
            f"have a result here" + (f" (missing: {', '.join(missing)})" if missing else "") + ". "
            + (f"Spearman rank agreement over them: {rho:.2f}. " if math.isfinite(rho) else "")
            + "diff = ours - paper, in points; the paper's rows are single runs on TPU.\n")
    shown = pd.DataFrame({
        "attention": out["attention"], "paper row": out["paper row"], f"{label} (ours)": out["ours"],
        f"{label} (paper)": [f"{v:.2f}" if math.isfinite(v) else "" for v in out["paper"]],
        "diff": [f"{v:+.2f}" if math.isfinite(v) else "" for v in out["diff"]],
    })
    return out.assign(rank_agreement=rho), head + "\n" + shown.to_markdown(index=False, disable_numparse=True) + "\n"
