"""95 % confidence intervals of an accuracy: over seeds (Student t, n - 1 degrees of freedom), of one seed's test
sample alone (Wilson score interval), and of an average of independent task means (Welch-Satterthwaite).

Everything is in the unit it is given (fractions or percentage points); ``wilson`` takes counts.
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
