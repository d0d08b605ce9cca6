"""Variants whose test predictions are another's, example by example, on every seed: one accuracy under several
names, not separate results.

At short lengths some sparse patterns reach every key and run plain attention: with the blocked kernel (CPU),
BigBird's blocks and Longformer's band at <= 256 tokens (docs/zoo_part1.md), bit-identically to ``flash``. Their
Table 1 cells and bubbles' heights then repeat one result; :func:`identical_groups` finds them from the records'
per-example predictions and :func:`identical_note` says so under Table 1 and the chart. Runs collapsed to one
predicted class are left out: variants that all predict one class agree for another reason, reported as collapsed.
A group needs the same seeds on the same test set (a seed more or less, and it is not one result).
"""

from __future__ import annotations

import pandas as pd

from lra_bench.reports.table1 import TASK_LABELS, TASKS, attention_order, scored_runs
from lra_bench.store.predictions import decode

#: the variants that run the same function as flash where their patterns reach every key (the blocked kernel)
PLAIN_AT_SHORT_LENGTHS = {"flash", "bigbird", "longformer"}


def _signature(a: pd.DataFrame) -> tuple | None:
    """(test set, ((seed, predictions), ...)) of one variant's ok records on one task and profile; None when a
    record has no readable predictions or predicts a single class, or the seeds were scored on different test sets
    or repeat."""
    seeds = a["seed"].map(str)  # the key scored_runs uses: a seed written as 0, 0.0 or "0" is one seed
    if a["test_set"].nunique() != 1 or seeds.duplicated().any():
        return None
    found = []
    for seed, field in zip(seeds, a["predictions"], strict=True):
        if not isinstance(field, dict):
            return None
        try:
            predicted, _ = decode(field)
        except ValueError:
            return None
        if len(set(predicted.tolist())) < 2:
            return None  # collapsed to one class
        found.append((seed, predicted.tobytes()))
    return a["test_set"].iloc[0], tuple(sorted(found))


def identical_groups(runs: pd.DataFrame, profile: str | None) -> dict[tuple[str, str], list[list[str]]]:
    """(profile, task) -> groups of two or more variants (in the table's order) whose ok records have the same seeds
    on the same test set and, seed by seed, the same predicted class for every test example. ``profile`` None:
    every profile, each on its own."""
    ok = scored_runs(runs, profile)
    ok = ok[ok["status"] == "ok"]
    found: dict[tuple[str, str], list[list[str]]] = {}
    order = {t: i for i, t in enumerate(TASKS)}
    for (prof, task), t in sorted(ok.groupby(["profile", "task"]), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99),
                                                                                     kv[0][1])):
        by_signature: dict[tuple, list[str]] = {}
        for att, a in t.groupby("attention", sort=False):
            if (sig := _signature(a)) is not None:
                by_signature.setdefault(sig, []).append(str(att))
        groups = [attention_order(g) for g in by_signature.values() if len(g) > 1]
        if groups:
            found[(str(prof), str(task))] = sorted(groups)
    return found


def identical_note(runs: pd.DataFrame, profile: str | None, chart: bool = False) -> str:
    """Markdown naming the variants that repeat another's predictions ('' when none). ``chart``: said of the
    bubbles, whose heights are one result but whose speed and memory are each variant's own."""
    groups = identical_groups(runs, profile)
    if not groups:
        return ""
    lines, every = [], set()
    for (prof, task), task_groups in groups.items():
        lines.append(f"{TASK_LABELS.get(task, task)} (`{prof}`): " + "; ".join(", ".join(g) for g in task_groups))
        every.update(a for g in task_groups for a in g)
    why = ("at the runs' lengths BigBird's blocks and Longformer's band reach every key and run plain attention, the "
           "same function as flash (docs/zoo_part1.md)" if every <= PLAIN_AT_SHORT_LENGTHS else
           "one function, or one result filed under several names: check their configs")
    what = ("their bubbles' heights are one accuracy, their speed and memory each one's own" if chart else
            "one result under several names, not independent ones")
    return (f"**The same predictions, example by example, on every seed** ({what}; {why}): "
            + " | ".join(lines) + ".\n")
