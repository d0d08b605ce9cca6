"""The paired test of a variant against a reference on the same test examples, accounting for seeds, Holm's
step-down correction across variants, and the two one-sided tests of equivalence and non-inferiority.

For variant A (seeds a = 1..nA) and reference R (seeds 1..nR), ``c[s, i]`` = 1 when seed s got test example i
right. The difference of mean accuracies d = mean_s acc_A,s - mean_s acc_R,s = mean_i (abar_i - rbar_i) varies
with the seeds (training randomness) and with the test examples drawn. Its variance is estimated in two parts:

* seeds: s_A^2 / nA + s_R^2 / nR, the sample variances (ddof 1) of the per-seed accuracies;
* examples, paired: the variance over i of abar_i - rbar_i, over N; both variants see the same examples, so
  what is easy for one is easy for the other and the difference varies far less than each accuracy. The part
  of it that is seed noise within one example (already in the seed term) is subtracted (method of moments,
  clipped at 0).

t = d / se, two-sided, with Welch-Satterthwaite degrees of freedom (nA - 1, nR - 1 and N - 1 for the three terms)
capped at nA + nR - 2: with 3 seeds a side the uncapped df (median 4.2) made the tail liberal -- p <= 0.005 in
1.0 % of simulated null pairs, which Holm over 10 variants turned into a family-wise error of 10 %; capped, 0.16 %.
It needs 2 or more seeds on each side: with one seed the seed-to-seed spread is unknown and no test is made.
Vectorised over leading axes (the simulations in tests/test_stats.py run thousands at once).

:func:`pairwise_paired` gives the same test for every pair of variants of a table at once (the confidence set for the
best, :mod:`lra_bench.stats.best`).

Equivalence within a margin m (:func:`tost`): two one-sided tests, H0 d <= -m and H0 d >= m, each at alpha; both
rejected (p = the larger of the two <= alpha) shows |d| < m. A bar "at least the reference minus m" is shown when the
one-sided lower confidence bound of d (:func:`lower_bound`) is at least -m -- the non-inferiority test, one half of
the TOST -- never by the point estimate.

Without per-example predictions (older records) :func:`welch_seeds` compares per-seed accuracies alone. That test is
conditional on the test set: it leaves out the test-example term, so its standard error is never larger than the
paired one's and it is not the more conservative of the two; it says whether the variants differ on this test set.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

ALPHA = 0.05


def paired_difference(a, r) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(d, se, df) for correctness arrays ``a`` (..., nA, N) and ``r`` (..., nR, N) on the same N examples."""
    a = np.asarray(a, np.float64)
    r = np.asarray(r, np.float64)
    na, nr, n = a.shape[-2], r.shape[-2], a.shape[-1]
    if r.shape[-1] != n:
        raise ValueError(f"paired test on different test sets: {n} and {r.shape[-1]} examples")
    if na < 2 or nr < 2:
        raise ValueError(f"the paired test needs >= 2 seeds per variant (got {na} and {nr})")
    acc_a, acc_r = a.mean(-1), r.mean(-1)                                   # (..., nA), (..., nR)
    d = acc_a.mean(-1) - acc_r.mean(-1)
    seed_a = acc_a.var(-1, ddof=1) / na
    seed_r = acc_r.var(-1, ddof=1) / nr
    per_example = a.mean(-2) - r.mean(-2)                                   # (..., N)
    within = (a.var(-2, ddof=1).mean(-1) / na + r.var(-2, ddof=1).mean(-1) / nr) / n
    example = np.maximum(per_example.var(-1, ddof=1) / n - within, 0.0)
    return d, np.sqrt(seed_a + seed_r + example), paired_df(seed_a, seed_r, example, na, nr, n)


def paired_df(seed_a, seed_r, example, na: int, nr: int, n: int) -> np.ndarray:
    """Degrees of freedom of the paired test's variance ``seed_a + seed_r + example`` (estimates with nA - 1, nR - 1
    and N - 1 df): Welch-Satterthwaite, capped at nA + nR - 2 (the module's docstring says why); infinite where the
    variance is known exactly (every term 0)."""
    var = seed_a + seed_r + example
    denom = seed_a**2 / (na - 1) + seed_r**2 / (nr - 1) + example**2 / (n - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(denom > 0, var**2 / np.where(denom > 0, denom, 1.0), np.inf)
    return np.minimum(df, na + nr - 2)


def pairwise_paired(correct) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(d, se, df), each (..., V, V), of :func:`paired_difference` for every ordered pair (row minus column) of the
    V variants of ``correct`` (..., V, S, N): one test set, S >= 2 seeds each. The diagonal is d = 0, se = 0."""
    c = np.asarray(correct, np.float64)
    s, n = c.shape[-2], c.shape[-1]
    if s < 2:
        raise ValueError(f"the paired test needs >= 2 seeds per variant (got {s})")
    acc = c.mean(-1)                                                        # (..., V, S)
    mean = acc.mean(-1)                                                     # (..., V)
    seed = acc.var(-1, ddof=1) / s
    cbar = c.mean(-2)                                                       # (..., V, N)
    centred = cbar - cbar.mean(-1, keepdims=True)
    cov = centred @ np.swapaxes(centred, -1, -2) / (n - 1)                  # (..., V, V) over examples
    var_diag = np.diagonal(cov, axis1=-2, axis2=-1)
    within = c.var(-2, ddof=1).mean(-1) / s                                 # (..., V)
    pair_var = var_diag[..., :, None] + var_diag[..., None, :] - 2 * cov    # var_i of cbar_A - cbar_B
    example = np.maximum(pair_var / n - (within[..., :, None] + within[..., None, :]) / n, 0.0)
    seed_a, seed_r = seed[..., :, None], seed[..., None, :]
    var = seed_a + seed_r + example
    eye = np.eye(mean.shape[-1], dtype=bool)
    return (mean[..., :, None] - mean[..., None, :], np.where(eye, 0.0, np.sqrt(var)),
            paired_df(seed_a, seed_r, example, s, s, n))


def welch_seeds(acc_a, acc_r) -> tuple[float, float, float]:
    """(d, se, df) from per-seed accuracies alone (>= 2 seeds each): Welch's unpaired t over seeds."""
    a, r = np.asarray(acc_a, float), np.asarray(acc_r, float)
    if len(a) < 2 or len(r) < 2:
        raise ValueError(f"Welch's test needs >= 2 seeds per variant (got {len(a)} and {len(r)})")
    va, vr = a.var(ddof=1) / len(a), r.var(ddof=1) / len(r)
    var = va + vr
    denom = va**2 / (len(a) - 1) + vr**2 / (len(r) - 1)
    return float(a.mean() - r.mean()), float(np.sqrt(var)), float(var**2 / denom) if denom > 0 else np.inf


def p_value(d, se, df) -> np.ndarray:
    """Two-sided p of t = d / se with ``df`` degrees of freedom (normal where df is infinite); 1 where se = 0 and
    d = 0, 0 where se = 0 and d != 0."""
    d, se, df = np.broadcast_arrays(*(np.asarray(v, float) for v in (d, se, df)))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.abs(d) / se
    t = np.where(se > 0, t, np.where(d == 0, 0.0, np.inf))
    p = np.where(np.isinf(df), 2 * stats.norm.sf(t), 2 * stats.t.sf(t, np.where(np.isinf(df), 1.0, df)))
    return np.minimum(p, 1.0)


def one_sided_p(d, se, df) -> np.ndarray:
    """p of H0 "the true difference is <= 0" against "> 0": P(T >= d / se) (0 or 1 where se = 0, NaN where d or se
    is NaN: untested)."""
    d, se, df = np.broadcast_arrays(*(np.asarray(v, float) for v in (d, se, df)))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = d / se
    t = np.where(se > 0, t, np.where(d > 0, np.inf, -np.inf))
    p = np.where(np.isinf(df), stats.norm.sf(t), stats.t.sf(t, np.where(np.isinf(df), 1.0, df)))
    return np.where(np.isnan(se) | np.isnan(d), np.nan, p)


def tost(d, se, df, margin) -> np.ndarray:
    """p of the two one-sided tests of equivalence within +-``margin`` (same unit as d): the larger of the p's of
    H0 d <= -margin and H0 d >= margin; <= alpha shows |true d| < margin at level alpha."""
    d = np.asarray(d, float)
    return np.maximum(one_sided_p(d + margin, se, df), one_sided_p(margin - d, se, df))


def lower_bound(d, se, df, level: float = 0.95) -> np.ndarray:
    """One-sided lower confidence bound of the true difference at ``level``: d - t_level * se. A bar "difference
    >= -m" is shown when this is >= -m (non-inferiority at 1 - level)."""
    d, se, df = np.broadcast_arrays(*(np.asarray(v, float) for v in (d, se, df)))
    q = np.where(np.isinf(df), stats.norm.ppf(level), stats.t.ppf(level, np.where(np.isinf(df), 1.0, df)))
    return d - q * se


def holm_adjusted(pvalues) -> np.ndarray:
    """Holm-adjusted p-values along the last axis: sort p ascending, p_(k) times (m - k), running maximum, at most
    1; reject where adjusted p <= alpha (family-wise error <= alpha). NaN p-values stay NaN and do not count in m."""
    p = np.asarray(pvalues, float)
    valid = ~np.isnan(p)
    m = valid.sum(-1, keepdims=True)
    order = np.argsort(np.where(valid, p, np.inf), axis=-1)               # NaN last
    sorted_p = np.take_along_axis(p, order, -1)
    k = np.arange(p.shape[-1])
    scaled = np.where(k < m, (m - k) * np.nan_to_num(sorted_p, nan=0.0), np.nan)
    running = np.fmax.accumulate(scaled, axis=-1)                        # the step-down: never below an earlier one
    out = np.empty_like(p)
    np.put_along_axis(out, order, np.where(k < m, np.minimum(running, 1.0), np.nan), -1)
    return out


def holm(pvalues, alpha: float = ALPHA) -> np.ndarray:
    """Holm's rejections along the last axis (NaN never rejected)."""
    return holm_adjusted(pvalues) <= alpha
