"""Variants whose test predictions are another's, example by example, on every seed: the same function at these
lengths, not a separate result.

At short lengths some sparse patterns reach every key and run plain attention (BigBird's blocks and Longformer's
band at <= 256 tokens: docs/zoo_part1.md), bit-identically to ``flash``. Their Table 1 cells and bubbles then repeat
one result under several names; :func:`identical_groups` finds them from the records' per-example predictions and
:func:`identical_note` says so under Table 1 and the chart. Runs collapsed to one predicted class are left out:
variants that all predict one class agree for another reason, reported as collapsed.
"""

from __future__ import annotations

import pandas as pd

from lra_bench.reports.table1 import TASK_LABELS, attention_order, scored_runs
from lra_bench.store.predictions import decode


def _signature(a: pd.DataFrame) -> tuple | None:
    """(test set, ((seed, predictions), ...)) of one variant's ok records on one task; None when a record has no
    readable predictions or predicts a single class, or when the seeds were scored on different test sets."""
    if a["test_set"].nunique() != 1 or a["seed"].duplicated().any():
        return None
    seeds = []
    for seed, field in zip(a["seed"], a["predictions"], strict=True):
        if not isinstance(field, dict):
            return None
        try:
            predicted, _ = decode(field)
        except ValueError:
            return None
        if len(set(predicted.tolist())) < 2:
            return None  # collapsed to one class
        seeds.append((seed, predicted.tobytes()))
    return a["test_set"].iloc[0], tuple(sorted(seeds))


def identical_groups(runs: pd.DataFrame, profile: str | None) -> dict[str, list[list[str]]]:
    """Task -> groups of two or more variants (in the table's order) whose ok records of ``profile`` have the same
    seeds on the same test set and, seed by seed, the same predicted class for every test example."""
    ok = scored_runs(runs, profile)
    ok = ok[ok["status"] == "ok"]
    found: dict[str, list[list[str]]] = {}
    for task, t in ok.groupby("task", sort=True):
        by_signature: dict[tuple, list[str]] = {}
        for att, a in t.groupby("attention", sort=False):
            if (sig := _signature(a)) is not None:
                by_signature.setdefault(sig, []).append(str(att))
        groups = [attention_order(g) for g in by_signature.values() if len(g) > 1]
        if groups:
            found[str(task)] = sorted(groups)
    return found


def identical_note(runs: pd.DataFrame, profile: str | None) -> str:
    """Markdown naming the variants that repeat another's predictions ('' when none)."""
    groups = identical_groups(runs, profile)
    if not groups:
        return ""
    lines = []
    for task, task_groups in groups.items():
        said = "; ".join(f"{', '.join(g)}" for g in task_groups)
        lines.append(f"{TASK_LABELS.get(task, task)}: {said}")
    return ("**The same predictions, example by example, on every seed** (one result under several names, not "
            "independent ones; at these lengths a sparse pattern that reaches every key runs plain attention -- "
            "BigBird's blocks and Longformer's band up to 256 tokens, docs/zoo_part1.md): "
            + " | ".join(lines) + ".\n")
