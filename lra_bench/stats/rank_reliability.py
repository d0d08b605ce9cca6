"""How reproducible a ranking of variants is.

* Kendall's tau between the rankings that two disjoint halves of the seeds give (tau = 1: the same order; 0:
  unrelated; a ranking that noise decides has tau near 0; tau-b: variants tied within a half count as ties).
  Which seed goes into which half changes tau a lot (ListOps at 3 seeds: 0.21, 0.47 or 0.11), so
  :func:`split_tau` averages it over every split of the seeds into halves, with a 95 % interval from the jackknife
  over variants (tau is a U-statistic of variant pairs; leaving one variant out at a time estimates its variance).
* The reliability of the k-seed mean (:func:`mean_reliability`): the share of the variance of the variants' k-seed
  means that is real difference between variants, the intraclass correlation ICC(1, k) = 1 - MS_within /
  MS_between of the one-way layout (variants x seeds), with the exact F interval (McGraw & Wong 1996, case 1).
* P(same top-1) and P(same top-3 set) (:func:`same_top`): the chance that two reruns of the design (new seeds, k
  each, the same test set) agree on the top variant and on the set of the top three, by simulation from the
  empirical-Bayes posterior of the variants' true means (the observed means shrunk toward their average by the
  reliability) and the pooled seed variance.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import stats

LEVEL = 0.95
DRAWS = 20_000


def common_seeds(accs: dict[str, dict]) -> tuple[list[str], list, list[str]]:
    """(variants ranked, the seed set they share, variants left out) for ``accs``: variant -> {seed: accuracy}.
    Variants with fewer than 2 seeds are left out; the seed set is, among those at least as large as the most common
    number of seeds a variant has, the one that the most variants share: one variant run on other seeds, or on fewer
    (a failed run), is left out and named, rather than emptying the common set or cutting every variant down to its
    seeds. Empty when no set of 2 or more seeds is shared."""
    usable = {v: frozenset(s) for v, s in accs.items() if len(s) >= 2}
    if not usable:
        return [], [], []
    counts = [len(s) for s in usable.values()]
    typical = max(set(counts), key=lambda k: (counts.count(k), k))  # the most common count (ties: the larger)
    candidates = {s for s in usable.values()} | {frozenset.intersection(*usable.values())}
    # the seed set contained in the most variants' seeds; then the larger set; then the smaller seeds
    scored = [(sum(c <= s for s in usable.values()), len(c), [-x for x in sorted(c)], c) for c in candidates
              if len(c) >= max(2, typical)]
    if not scored:
        return [], [], []
    *_, common = max(scored, key=lambda t: t[:3])
    names = sorted(v for v, s in usable.items() if common <= s)
    return names, sorted(common), sorted(set(usable) - set(names))


def seed_splits(seeds) -> list[tuple[list, list]]:
    """Every split of ``seeds`` into two halves (floor(n/2) and the rest), each unordered split once."""
    s = sorted(seeds)
    k = len(s) // 2
    out = []
    for first in itertools.combinations(s, k):
        if len(s) % 2 == 0 and s[0] not in first:
            continue  # equal halves: {a, b} | {c, d} and {c, d} | {a, b} are one split
        out.append((list(first), [x for x in s if x not in first]))
    return out


def _tau(matrix: np.ndarray, first: list[int], second: list[int]) -> float:
    x, y = matrix[:, first].mean(1), matrix[:, second].mean(1)
    if len(set(x)) == 1 or len(set(y)) == 1:
        return math.nan
    return float(stats.kendalltau(x, y).statistic)


def _mean_tau(matrix: np.ndarray, splits: list[tuple[list[int], list[int]]]) -> float:
    taus = [_tau(matrix, a, b) for a, b in splits]
    finite = [t for t in taus if math.isfinite(t)]
    return float(np.mean(finite)) if finite else math.nan


def split_tau(accs: dict[str, dict], level: float = LEVEL) -> dict:
    """Kendall's tau between seed halves averaged over every split of the common seeds, with its jackknife
    interval over variants: {tau, low, high, splits, variants, seeds, left_out, why}; NaN tau (and ``why``) with
    fewer than 3 variants sharing 2 or more seeds, or when every split has a half that ranks all variants equal."""
    names, seeds, left_out = common_seeds(accs)
    out = {"tau": math.nan, "low": math.nan, "high": math.nan, "splits": 0, "variants": len(names), "seeds": seeds,
           "left_out": left_out, "why": ""}
    if len(names) < 3:
        return {**out, "why": "needs >= 3 variants sharing >= 2 seeds"}
    matrix = np.array([[accs[v][s] for s in seeds] for v in names], float)      # (variants, seeds)
    splits = [([seeds.index(x) for x in a], [seeds.index(x) for x in b]) for a, b in seed_splits(seeds)]
    tau = _mean_tau(matrix, splits)
    out.update(tau=tau, splits=len(splits))
    if not math.isfinite(tau):
        return {**out, "why": "undefined: a half ranks every variant equal in every split"}
    v = len(names)
    if v >= 4:
        leave_one = np.array([_mean_tau(np.delete(matrix, i, 0), splits) for i in range(v)])
        if np.all(np.isfinite(leave_one)):
            se = math.sqrt((v - 1) / v * np.sum((leave_one - leave_one.mean()) ** 2))
            z = float(stats.norm.ppf(0.5 + level / 2))
            out.update(low=max(-1.0, tau - z * se), high=min(1.0, tau + z * se))
    return out


def mean_reliability(accs: dict[str, dict], level: float = LEVEL) -> dict:
    """Reliability of the k-seed mean, ICC(1, k) = 1 - MS_within / MS_between over the variants sharing the common
    seeds (k of them), with its exact F interval: {icc, low, high, k, variants, ms_within}. NaN with fewer than 3
    variants or 2 seeds, or with no spread within."""
    names, seeds, _ = common_seeds(accs)
    out = {"icc": math.nan, "low": math.nan, "high": math.nan, "k": len(seeds), "variants": len(names),
           "ms_within": math.nan}
    if len(names) < 3:
        return out
    x = np.array([[accs[v][s] for s in seeds] for v in names], float)          # (variants, k)
    v, k = x.shape
    ms_between = k * x.mean(1).var(ddof=1)
    ms_within = float(x.var(1, ddof=1).mean())
    out["ms_within"] = ms_within
    if ms_within <= 0 or ms_between <= 0:
        return out
    f = ms_between / ms_within
    d1, d2 = v - 1, v * (k - 1)
    f_lo = f / stats.f.ppf(0.5 + level / 2, d1, d2)
    f_hi = f * stats.f.ppf(0.5 + level / 2, d2, d1)
    return {**out, "icc": 1 - 1 / f, "low": 1 - 1 / f_lo, "high": 1 - 1 / f_hi}


def same_top(accs: dict[str, dict], top: int = 3, draws: int = DRAWS, seed: int = 0) -> tuple[float, float]:
    """(P(same top-1), P(same top-``top`` set)) of two reruns with k new seeds each (k = the common seeds), simulated
    from the empirical-Bayes posterior of the variants' true means: mean + R (mean_v - mean), variance R MS_w / k,
    R = the reliability of the k-seed mean clipped at 0; a rerun adds N(0, MS_w / k). NaN when not computable (the
    top-``top`` one needs more than ``top`` variants)."""
    names, seeds, _ = common_seeds(accs)
    rel = mean_reliability(accs)
    if len(names) < 3 or not rel["ms_within"] > 0:
        return math.nan, math.nan
    x = np.array([[accs[v][s] for s in seeds] for v in names], float)
    k = x.shape[1]
    r = max(rel["icc"], 0.0) if math.isfinite(rel["icc"]) else 0.0
    means = x.mean(1)
    centre = means.mean() + r * (means - means.mean())
    noise = math.sqrt(rel["ms_within"] / k)
    rng = np.random.default_rng(seed)
    truth = centre + math.sqrt(r) * noise * rng.standard_normal((draws, len(names)))
    a = truth + noise * rng.standard_normal(truth.shape)
    b = truth + noise * rng.standard_normal(truth.shape)
    same1 = float(np.mean(a.argmax(1) == b.argmax(1)))
    if len(names) <= top:
        return same1, math.nan
    top_a = np.sort(np.argsort(-a, 1)[:, :top], 1)
    top_b = np.sort(np.argsort(-b, 1)[:, :top], 1)
    return same1, float(np.mean((top_a == top_b).all(1)))
