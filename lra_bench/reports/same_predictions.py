"""Cells that are one result under several names: variants whose ok runs predicted the same class for every test
example, seed by seed, on the same test set and seeds.

At short lengths some sparse patterns reach every key and run plain attention (BigBird's blocks and Longformer's
band at <= 256 tokens with the blocked kernel: docs/zoo_part1.md), bit-identically to ``flash``. Such cells are one
measurement, so the statistics count them once (:mod:`lra_bench.reports.verdicts`: Holm's family, Hsu's comparisons
with the best, P(rank 1), the detectable gap; :mod:`lra_bench.reports.reliability`) and the reports name them
(:mod:`lra_bench.reports.identical`). Cells with a collapsed run are left out: variants that all predict the commonest
class agree for another reason, and are reported as collapsed (so a task at chance keeps them apart, counted as
separate variants: conservative for the tests, and such a task is out of the average). A group needs two or more
seeds: identical predictions on every example of every seed is then the mark of one function, not a coincidence.
"""

from __future__ import annotations

import pandas as pd


def result_key(sample, seeds, collapsed: bool) -> tuple | None:
    """(test set, ((seed, digest of its predicted classes), ...)) of a group of runs (its ``significance.Sample``,
    its seeds, whether any run collapsed): two groups with one key are one result. None without per-example
    predictions, with a collapsed run, with fewer than two seeds or with a seed twice."""
    seeds = [str(s) for s in seeds]  # scored_runs' key: a seed written as 0, 0.0 or "0" is one seed
    if sample is None or sample.predicted is None or collapsed or len(seeds) < 2 or len(set(seeds)) != len(seeds):
        return None  # one seed is too little evidence of one function, and such a cell enters no test anyway
    return sample.fingerprint, tuple(sorted(zip(seeds, sample.predicted, strict=True)))


def _key(cell) -> tuple | None:
    """``result_key`` of one cell (a row of :func:`lra_bench.reports.table1.task_cells`)."""
    return result_key(cell.sample, cell.seeds, bool(cell.collapsed))


def groups(cells: pd.DataFrame) -> dict[tuple[str, str], list[list[str]]]:
    """(profile, task) -> the groups (each sorted by name, two or more variants) of ``cells`` (task_cells' frame)
    that are one result; only (profile, task) pairs that have one."""
    found: dict[tuple[str, str], list[list[str]]] = {}
    for (prof, task), t in cells[cells.n > 0].groupby(["profile", "task"], sort=True):
        by_key: dict[tuple, list[str]] = {}
        for cell in t.itertuples():
            if (key := _key(cell)) is not None:
                by_key.setdefault(key, []).append(str(cell.attention))
        if same := sorted(sorted(g) for g in by_key.values() if len(g) > 1):
            found[(str(prof), str(task))] = same
    return found


def representatives(same: list[list[str]], keep: str = "") -> dict[str, str]:
    """name -> the name its group is counted under, for every member of ``same`` (groups of one task): ``keep`` (the
    reference) where it is a member, otherwise the group's first name."""
    return {name: keep if keep in group else group[0] for group in same for name in group}


def drop_repeats(cells: pd.DataFrame, keep: str = "") -> pd.DataFrame:
    """``cells`` with each group of one result kept once: under ``keep`` (the reference a caller pairs with) where
    it is a member, otherwise under its first name."""
    repeats = {(prof, task, name) for (prof, task), same in groups(cells).items()
               for name, rep in representatives(same, keep).items() if name != rep}
    keep = [(str(r.profile), str(r.task), str(r.attention)) not in repeats for r in cells.itertuples()]
    return cells[keep]
