"""Variants whose test predictions are another's, example by example, on every seed: one accuracy under several
names, not separate results.

At short lengths some sparse patterns reach every key and run plain attention: with the blocked kernel (CPU),
BigBird's blocks and Longformer's band at <= 256 tokens (docs/zoo_part1.md), bit-identically to ``flash``. Their
Table 1 cells and bubbles' heights then repeat one result; :mod:`lra_bench.reports.same_predictions` finds them from
the records' per-example predictions (the statistics count each such result once) and :func:`identical_note` says so
under Table 1 and the chart. Cells with a collapsed run are left out: variants that all predict one class agree for
another reason, reported as collapsed. A group needs the same seeds on the same test set (a seed more or less, and it
is not one result).
"""

from __future__ import annotations

import pandas as pd

from lra_bench.reports.same_predictions import groups
from lra_bench.reports.table1 import TASK_LABELS, TASKS, attention_order

#: the variants that run the same function as flash where their patterns reach every key (the blocked kernel)
PLAIN_AT_SHORT_LENGTHS = {"flash", "bigbird", "longformer"}


def identical_groups(cells: pd.DataFrame) -> dict[tuple[str, str], list[list[str]]]:
    """(profile, task) -> groups of two or more variants (in the table's order) whose ok records have the same seeds
    (two or more) on the same test set and, seed by seed, the same predicted class for every test example, from
    :func:`lra_bench.reports.table1.task_cells` (of one profile or of every profile, each on its own)."""
    order = {t: i for i, t in enumerate(TASKS)}
    found = groups(cells)
    return {key: sorted(attention_order(g) for g in found[key])
            for key in sorted(found, key=lambda k: (k[0], order.get(k[1], 99), k[1]))}


def identical_note(cells: pd.DataFrame, chart: bool = False) -> str:
    """Markdown naming the variants that repeat another's predictions ('' when none), from ``cells``
    (:func:`lra_bench.reports.table1.task_cells`). ``chart``: said of the bubbles, whose heights are one result but
    whose speed and memory are each variant's own."""
    found = identical_groups(cells)
    if not found:
        return ""
    lines, every = [], set()
    for (prof, task), task_groups in found.items():
        lines.append(f"{TASK_LABELS.get(task, task)} (`{prof}`): " + "; ".join(", ".join(g) for g in task_groups))
        every.update(a for g in task_groups for a in g)
    why = ("at the runs' lengths BigBird's blocks and Longformer's band reach every key and run plain attention, the "
           "same function as flash, through its code path (docs/zoo_part1.md)" if every <= PLAIN_AT_SHORT_LENGTHS else
           "one function, or one result filed under several names: check their configs")
    what = ("their bubbles' heights are one accuracy, their speed and memory each one's own" if chart else
            "one result under several names, not independent ones")
    return (f"**The same predictions, example by example, on every seed** ({what}; {why}): "
            + " | ".join(lines) + ".\n")
