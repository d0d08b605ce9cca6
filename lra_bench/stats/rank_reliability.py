"""How reproducible a ranking of variants is: Kendall's tau between the rankings that two disjoint halves of the
seeds give (seeds sorted; the first floor(n/2) against the rest; with 2 seeds, seed 0 against seed 1).
tau = 1: the same order; 0: unrelated; a ranking that noise decides has tau near 0."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def split_halves(seeds) -> tuple[list, list]:
    """Two disjoint halves of the sorted ``seeds``: the first floor(n/2) and the rest."""
    s = sorted(seeds)
    k = len(s) // 2
    return s[:k], s[k:]


def half_tau(accs: dict[str, dict]) -> tuple[float, int, str]:
    """(tau, variants ranked, which seeds) for ``accs``: variant -> {seed: accuracy}. Variants with fewer than 2
    seeds are left out; the halves split the seeds all ranked variants share. NaN tau with fewer than 3."""
    usable = {v: s for v, s in accs.items() if len(s) >= 2}
    common = sorted(set.intersection(*(set(s) for s in usable.values()))) if usable else []
    if len(usable) < 3 or len(common) < 2:
        return math.nan, len(usable), "needs >= 3 variants sharing >= 2 seeds"
    first, second = split_halves(common)
    names = sorted(usable)
    x = [np.mean([usable[v][s] for s in first]) for v in names]
    y = [np.mean([usable[v][s] for s in second]) for v in names]
    tau = stats.kendalltau(x, y).statistic
    return float(tau), len(names), f"seeds {first} vs {second}"
