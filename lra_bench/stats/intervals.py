"""95 % confidence intervals of an accuracy: over seeds (Student t, n - 1 degrees of freedom), of one seed's test
sample alone (Wilson score interval), of a cell's mean with both sources of noise (seeds and test examples,
:func:`cell_interval`), and of an average of independent task means (Welch-Satterthwaite).

A cell's accuracy varies with the training seed and with the test examples drawn. Its correctness matrix
``c[s, i]`` (seeds x examples) is a crossed two-way design, c = mu + a_s + b_i + e_si, and the variance of its grand
mean is sigma_a^2 / S + sigma_b^2 / N + sigma_e^2 / (S N) exactly (seeds and examples independent draws; any
0/1 outcome decomposes so). The mean squares estimate the three parts without bias (:func:`two_way_components`).

Everything is in the unit it is given (fractions or percentage points); ``wilson`` takes counts; the correctness
functions work in fractions.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

LEVEL = 0.95


def t_interval(values, level: float = LEVEL) -> tuple[float, float, float, float]:
    """(mean, low, high, standard error) of the mean of ``values`` (n >= 2): mean +- t_{n-1} * s / sqrt(n),
    s the sample standard deviation (ddof 1). ValueError with fewer than 2 values."""
    x = np.asarray(values, float)
    n = len(x)
    if n < 2:
        raise ValueError(f"a t interval needs at least 2 values, got {n}")
    se = float(x.std(ddof=1) / math.sqrt(n))
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * se
    m = float(x.mean())
    return m, m - half, m + half, se


def wilson(correct, n, level: float = LEVEL):
    """Wilson score interval (low, high) of a proportion ``correct / n`` (test sampling only), as fractions;
    scalars or arrays."""
    k, m = np.asarray(correct, float), np.asarray(n, float)
    if np.any(m <= 0) or np.any(k < 0) or np.any(k > m):
        raise ValueError(f"wilson needs 0 <= correct <= n, n > 0; got correct={correct}, n={n}")
    z = float(stats.norm.ppf(0.5 + level / 2))
    p = k / m
    centre = (p + z * z / (2 * m)) / (1 + z * z / m)
    half = z * np.sqrt(p * (1 - p) / m + z * z / (4 * m * m)) / (1 + z * z / m)
    low, high = np.maximum(0.0, centre - half), np.minimum(1.0, centre + half)
    return (float(low), float(high)) if low.ndim == 0 else (low, high)


def binomial_se(p: float, n: int) -> float:
    """Standard error of one accuracy ``p`` (fraction) measured on ``n`` test examples."""
    return math.sqrt(max(p * (1 - p), 0.0) / n)


def welch_df(variances, dfs) -> float:
    """Welch-Satterthwaite degrees of freedom of a sum of independent variance estimates."""
    v = np.asarray(variances, float)
    d = np.asarray(dfs, float)
    total = v.sum()
    denom = np.sum(np.where(np.isinf(d), 0.0, v**2 / d))
    return float(total**2 / denom) if denom > 0 else math.inf


def mean_interval(means, ses, dfs, level: float = LEVEL) -> tuple[float, float, float, float, float]:
    """(mean, low, high, se, df) of the average of independent estimates ``means`` with standard errors ``ses``
    and degrees of freedom ``dfs`` (math.inf for a normal approximation): the LRA average over tasks."""
    m = np.asarray(means, float)
    s = np.asarray(ses, float)
    k = len(m)
    variances = (s / k) ** 2
    se = float(math.sqrt(variances.sum()))
    df = welch_df(variances, dfs)
    q = float(stats.norm.ppf(0.5 + level / 2)) if math.isinf(df) else float(stats.t.ppf(0.5 + level / 2, df))
    avg = float(m.mean())
    return avg, avg - q * se, avg + q * se, se, df


def _satterthwaite(terms, dfs):
    """Welch-Satterthwaite degrees of freedom of a sum of variance terms (arrays broadcast; inf where all are 0)."""
    terms = [np.asarray(t, float) for t in terms]
    total = sum(terms)
    denom = sum(t**2 / d for t, d in zip(terms, dfs, strict=True))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denom > 0, total**2 / np.where(denom > 0, denom, 1.0), np.inf)


def two_way_components(correct):
    """(seed, example, residual) variance components of correctness ``correct`` (..., S, N) (0/1, S >= 2 seeds,
    N >= 2 examples), by the mean squares of the crossed two-way design: residual = MS_res, seed = var_s(acc_s) -
    MS_res / N, example = var_i(cbar_i) - MS_res / S (the last two clipped at 0). Unbiased before clipping."""
    c = np.asarray(correct, np.float64)
    s, n = c.shape[-2], c.shape[-1]
    if s < 2 or n < 2:
        raise ValueError(f"variance components need >= 2 seeds and >= 2 examples, got {s} x {n}")
    acc, cbar, grand = c.mean(-1), c.mean(-2), c.mean((-2, -1))
    var_seed, var_example = acc.var(-1, ddof=1), cbar.var(-1, ddof=1)
    ss_total = ((c - grand[..., None, None]) ** 2).sum((-2, -1))
    residual = np.maximum(ss_total - n * (s - 1) * var_seed - s * (n - 1) * var_example, 0.0) / ((s - 1) * (n - 1))
    return (np.maximum(var_seed - residual / n, 0.0), np.maximum(var_example - residual / s, 0.0), residual)


def cell_interval(correct, level: float = LEVEL):
    """(mean, low, high, se, df) of a cell's accuracy from its correctness ``correct`` (..., S, N), S >= 2 seeds, as
    fractions: both sources of noise. se^2 = var_s(acc_s) / S (the seeds' spread, with its share of per-example
    noise) + max(var_i(cbar_i) / N - MS_res / (S N), 0) (test sampling), never below p~(1 - p~) / (S N) (the
    variance of S N independent outcomes, a lower bound of the design's; p~ the Wilson centre, so never 0); t with
    Welch-Satterthwaite degrees of freedom (S - 1 and N - 1); clipped to [0, 1]."""
    c = np.asarray(correct, np.float64)
    s, n = c.shape[-2], c.shape[-1]
    if s < 2:
        raise ValueError(f"a cell interval over seeds needs >= 2 seeds, got {s}")
    acc, cbar = c.mean(-1), c.mean(-2)
    mean = acc.mean(-1)
    _, _, residual = two_way_components(c)
    seed_term = acc.var(-1, ddof=1) / s
    example_term = np.maximum(cbar.var(-1, ddof=1) / n - residual / (s * n), 0.0)
    return _finish(mean, seed_term, example_term, s, n, s * n, level)


def seeds_binomial_interval(accs, n_examples: int, level: float = LEVEL):
    """(mean, low, high, se, df) of a cell's accuracy from its seeds' accuracies ``accs`` (fractions, >= 2) alone,
    when their per-example predictions are missing: the seeds' spread plus the test sampling bounded by the
    binomial p (1 - p) / N (the example term can be no larger), with the same floor and clipping as
    :func:`cell_interval`."""
    a = np.asarray(accs, float)
    s = len(a)
    if s < 2 or n_examples < 1:
        raise ValueError(f"needs >= 2 seeds and a known test size, got {s} seeds and {n_examples} examples")
    mean = float(a.mean())
    return _finish(mean, a.var(ddof=1) / s, mean * (1 - mean) / n_examples, s, n_examples, s * n_examples, level)


def _finish(mean, seed_term, example_term, seeds, examples, outcomes, level):
    z = float(stats.norm.ppf(0.5 + level / 2))
    centre = (np.asarray(mean) * outcomes + z * z / 2) / (outcomes + z * z)     # the Wilson centre: never 0 or 1
    floor = centre * (1 - centre) / outcomes
    var = np.maximum(seed_term + example_term, floor)
    df = np.minimum(_satterthwaite([seed_term, example_term], [seeds - 1, examples - 1]), np.inf)
    df = np.where(seed_term + example_term < floor, np.inf, df)               # at the floor: the binomial, normal
    q = np.where(np.isinf(df), z, stats.t.ppf(0.5 + level / 2, np.where(np.isinf(df), 1.0, df)))
    se = np.sqrt(var)
    lo, hi = np.maximum(mean - q * se, 0.0), np.minimum(mean + q * se, 1.0)
    out = (mean, lo, hi, se, df)
    return tuple(float(v) for v in out) if np.ndim(mean) == 0 else out
