"""Which variants may be the best: a selection-aware 95 % confidence set for the best (multiple comparisons with the
best, Hsu 1981/1996, constrained form with a Bonferroni critical value) and each variant's estimated probability of
ranking first.

Picking the observed best and testing the others against it reuses the data that picked it; reporting "not
rejected" as "tied" then reads lack of power as equality. Instead, variant i stays in the set unless some other
variant j is shown better than it: the one-sided paired test of "mean_j <= mean_i" rejected at alpha / (V - 1)
(V variants compared). For the true best b every such hypothesis "mean_j <= mean_b" is true, so the chance that any
of its V - 1 tests rejects is at most alpha (Bonferroni, whatever the correlations): the set holds the true best
with probability >= 1 - alpha. A variant outside the set is shown below some other variant; a variant inside
cannot be told apart from the best at this power -- it is not shown equal to it.

P(rank 1) is each variant's posterior probability of being the best under the normal hierarchical model that
empirical Bayes fits to the table: true means drawn around their average with a between-variant variance tau^2
(estimated as the spread of the observed means minus what their noise alone gives, clipped at 0), observed means
around the true ones with the table's pooled noise -- every variant the average cell variance, every pair the
average covariance (the shared test examples) -- since a variance estimated from 3 seeds is too uncertain to be
trusted cell by cell (a variant whose seeds happen to agree would be crowned). The posterior shrinks each mean
toward the average by how much of the spread is noise, so the observed leader is not credited with the luck that
made it lead. In simulated ListOps-like tables (23 variants spread over a true 3 points, tests/test_inference.py)
the leader is the true best 22 % of the time and this P(rank 1) gives it 0.33 on average; the plug-in share of
normal draws around the observed means with each cell's own variance gave 0.43 against 25 %. With tau^2 = 0 every
variant gets 1 / V. An estimate, not a test.
"""

from __future__ import annotations

import numpy as np

from lra_bench.stats.paired import ALPHA, one_sided_p

DRAWS = 20_000


def best_set(d, se, df, alpha: float = ALPHA) -> np.ndarray:
    """Membership (..., V) of the 1 - alpha confidence set for the best from the pairwise differences ``d``
    (..., V, V; row minus column), their standard errors and degrees of freedom. A pair that could not be tested
    (NaN) excludes nothing."""
    d, se, df = (np.asarray(v, float) for v in (d, se, df))
    v = d.shape[-1]
    if v < 2:
        return np.ones(d.shape[:-1], bool)
    p = one_sided_p(d, se, df)                       # p[j, i]: H0 "mean_j <= mean_i"
    beaten = np.where(np.isnan(p), False, p <= alpha / (v - 1))
    beaten &= ~np.eye(v, dtype=bool)
    return ~beaten.any(-2)                           # i is out when some row j beats column i


def covariance(variances, pair_se) -> np.ndarray:
    """A covariance matrix of V means with the given ``variances`` whose pairwise differences have standard errors
    ``pair_se`` (V, V; NaN = unknown, taken as uncorrelated): cov_ij = (var_i + var_j - se_ij^2) / 2, made positive
    semi-definite by clipping negative eigenvalues."""
    var = np.asarray(variances, float)
    se = np.asarray(pair_se, float)
    cov = (var[:, None] + var[None, :] - np.where(np.isnan(se), var[:, None] + var[None, :], se**2)) / 2
    np.fill_diagonal(cov, var)
    w, q = np.linalg.eigh((cov + cov.T) / 2)
    return (q * np.maximum(w, 0.0)) @ q.T


def pooled_covariance(cov) -> np.ndarray:
    """The covariance with every variance replaced by their mean and every covariance by theirs."""
    cov = np.asarray(cov, float)
    v = len(cov)
    if v < 2:
        return cov.copy()
    out = np.full((v, v), (cov.sum() - np.trace(cov)) / (v * (v - 1)))
    np.fill_diagonal(out, np.trace(cov) / v)
    return out


def rank_one_probability(means, cov, draws: int = DRAWS, seed: int = 0) -> np.ndarray:
    """Posterior P(rank 1) of each of V variants whose estimated means ``means`` have covariance ``cov`` (pass the
    pooled one), under the empirical-Bayes normal hierarchical model of the module docstring: the share of
    ``draws`` from the posterior in which each is highest (fixed ``seed``: reproducible)."""
    x = np.asarray(means, float)
    cov = np.asarray(cov, float)
    v = len(x)
    grand = x.mean()
    noise_between = (np.trace(cov) - cov.sum() / v) / (v - 1) if v > 1 else 0.0
    tau2 = max(float(x.var(ddof=1)) - noise_between, 0.0) if v > 1 else 0.0
    if tau2 == 0.0:
        return np.full(v, 1.0 / v)
    gain = tau2 * np.linalg.inv(tau2 * np.eye(v) + cov)             # tau^2 (tau^2 I + Sigma)^-1
    post_mean = grand + gain @ (x - grand)
    post_cov = tau2 * (np.eye(v) - gain)
    # the symmetric square root q sqrt(w) q^T, unique even where eigenvalues repeat (the pooled covariance's do: V - 1
    # of them are equal), so the draws do not depend on which eigenvectors this host's LAPACK picks for a repeated
    # eigenvalue; q sqrt(w) alone would (the same distribution, other draws: P(rank 1) moved by 0.0007 between hosts)
    w, q = np.linalg.eigh((post_cov + post_cov.T) / 2)
    root = (q * np.sqrt(np.maximum(w, 0.0))) @ q.T
    rng = np.random.default_rng(seed)
    draws_ = post_mean + rng.standard_normal((draws, v)) @ root
    return np.bincount(draws_.argmax(1), minlength=v) / draws
