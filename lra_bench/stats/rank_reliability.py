"""How reproducible a ranking of variants is: Kendall's tau between the rankings that two disjoint halves of the
seeds give (seeds sorted; the first floor(n/2) against the rest; with 2 seeds, seed 0 against seed 1).
tau = 1: the same order; 0: unrelated; a ranking that noise decides has tau near 0. Kendall's tau-b: variants tied
within a half count as ties."""

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
    """(tau, variants ranked, which seeds) for ``accs``: variant -> {seed: accuracy}. Kendall's tau-b (tied values
    counted as ties). Variants with fewer than 2 seeds are left out; the halves split the seed set that the most
    variants share (one variant run on other seeds is left out and named, rather than emptying the common set).
    NaN tau with fewer than 3 variants, or when either half ranks every variant equal."""
    usable = {v: frozenset(s) for v, s in accs.items() if len(s) >= 2}
    candidates = {s for s in usable.values()} | ({frozenset.intersection(*usable.values())} if usable else set())
    # the seed set contained in the most variants' seeds; then the larger set; then the smaller seeds
    scored = [(sum(c <= s for s in usable.values()), len(c), [-x for x in sorted(c)], c) for c in candidates
              if len(c) >= 2]
    if not scored:
        return math.nan, 0, "needs >= 3 variants sharing >= 2 seeds"
    *_, common = max(scored, key=lambda t: t[:3])
    names = sorted(v for v, s in usable.items() if common <= s)
    left_out = sorted(set(usable) - set(names))
    if len(names) < 3:
        return math.nan, len(names), "needs >= 3 variants sharing >= 2 seeds"
    first, second = split_halves(common)
    x = [np.mean([accs[v][s] for s in first]) for v in names]
    y = [np.mean([accs[v][s] for s in second]) for v in names]
    which = f"seeds {first} vs {second}" + (f" ({', '.join(left_out)} left out: other seeds)" if left_out else "")
    if len(set(x)) == 1 or len(set(y)) == 1:
        return math.nan, len(names), which + "; undefined: one half ranks every variant equal"
    return float(stats.kendalltau(x, y).statistic), len(names), which
