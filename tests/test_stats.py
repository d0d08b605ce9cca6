"""The statistics behind the reports, tested on simulated accuracies whose truth is known: the t interval's
coverage, Wilson's, the paired test's false-positive rate (per comparison and, with Holm, per family), its power
on a known 3-point effect with 3 seeds x 2,000 examples, and Kendall's tau between seed halves. Seeded and
vectorised (a few seconds)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from lra_bench.stats.intervals import mean_interval, t_interval, wilson
from lra_bench.stats.paired import holm, holm_adjusted, p_value, paired_difference, welch_seeds
from lra_bench.stats.rank_reliability import half_tau, split_halves

#: the simulated test sets: a per-example difficulty shared by all variants (what makes pairing pay), a variant's
#: own per-example deviation, a per-seed shift of the logit (training randomness) and Bernoulli outcomes
#: per-seed accuracy std ~0.9 points at 2,000 examples (measured on `quick`: 0.6 on Image, 1.7 on ListOps at 1,000)
DIFFICULTY_SD, OWN_SD, SEED_SD, BASE_ACC = 1.5, 0.5, 0.03, 0.60
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(80)


def expected_acc(logit_shift: float) -> float:
    """E[sigmoid(b + shift + X)], X ~ N(0, DIFFICULTY_SD^2 + OWN_SD^2), by Gauss-Hermite quadrature."""
    sd = math.hypot(DIFFICULTY_SD, OWN_SD)
    return float(np.sum(_WEIGHTS / (1 + np.exp(-(BASE_LOGIT + logit_shift + sd * _NODES)))) / math.sqrt(2 * math.pi))


def _solve(target: float, base: float = 0.0) -> float:
    lo, hi = -5.0, 5.0
    for _ in range(60):
        mid = (lo + hi) / 2
        sd = math.hypot(DIFFICULTY_SD, OWN_SD)
        acc = float(np.sum(_WEIGHTS / (1 + np.exp(-(base + mid + sd * _NODES)))) / math.sqrt(2 * math.pi))
        lo, hi = (mid, hi) if acc < target else (lo, mid)
    return (lo + hi) / 2


BASE_LOGIT = _solve(BASE_ACC)


def simulate(rng, sims: int, variants: int, seeds: int, examples: int, shifts=None) -> np.ndarray:
    """Correctness (sims, variants, seeds, examples) as uint8; ``shifts``: per-variant logit shifts."""
    shifts = np.zeros(variants) if shifts is None else np.asarray(shifts, float)
    difficulty = rng.normal(0, DIFFICULTY_SD, (sims, 1, 1, examples)).astype(np.float32)
    own = rng.normal(0, OWN_SD, (sims, variants, 1, examples)).astype(np.float32)
    seed = rng.normal(0, SEED_SD, (sims, variants, seeds, 1)).astype(np.float32)
    logit = BASE_LOGIT + shifts[None, :, None, None] + difficulty + own + seed
    return (rng.random(logit.shape, dtype=np.float32) < 1 / (1 + np.exp(-logit))).astype(np.uint8)


def test_t_interval_covers_the_mean_95_percent_with_three_seeds():
    """With n = 3 the t quantile (2 df) and the ddof-1 std give 95 %; n instead of n - 1 anywhere gives far less."""
    rng = np.random.default_rng(0)
    x = rng.normal(40.0, 1.7, (20000, 3))
    n = x.shape[1]
    half = stats.t.ppf(0.975, n - 1) * x.std(axis=1, ddof=1) / math.sqrt(n)
    # the library's function on a sample of rows, checked against the vectorised formula
    for row in x[:50]:
        m, lo, hi, _ = t_interval(row)
        assert m - lo == pytest.approx(stats.t.ppf(0.975, 2) * row.std(ddof=1) / math.sqrt(3))
    lows = np.array([t_interval(row)[1] for row in x[:4000]])
    covered = np.abs(x.mean(1) - 40.0) <= half
    assert 0.94 <= covered.mean() <= 0.96
    assert 0.94 <= np.mean(lows <= 40.0) and np.mean(lows <= 40.0) <= 0.985  # one-sided: 97.5 %
    with pytest.raises(ValueError, match="at least 2"):
        t_interval([40.0])


def test_t_interval_coverage_through_the_library():
    rng = np.random.default_rng(1)
    x = rng.normal(0.0, 1.0, (6000, 3))
    out = np.array([t_interval(row)[1:3] for row in x])
    covered = (out[:, 0] <= 0) & (0 <= out[:, 1])
    assert 0.94 <= covered.mean() <= 0.96, f"coverage {covered.mean():.3f} of a nominal 95 % interval"


def test_wilson_interval_covers_a_test_sample_accuracy():
    rng = np.random.default_rng(2)
    for p, n in ((0.35, 1000), (0.55, 2000), (0.95, 200)):
        k = rng.binomial(n, p, 20000)
        low, high = wilson(k, n)
        covered = np.mean((low <= p) & (p <= high))
        assert 0.93 <= covered <= 0.975, (p, n, covered)  # discrete: coverage oscillates near 95 %
    ref = stats.binomtest(350, 1000).proportion_ci(method="wilson")
    assert wilson(350, 1000) == pytest.approx((ref.low, ref.high))
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == pytest.approx(1.0)
    with pytest.raises(ValueError):
        wilson(11, 10)


def test_average_of_task_means_interval():
    m, lo, hi, se, df = mean_interval([40.0, 60.0], [1.0, 1.0], [2, 2])
    assert m == 50.0 and se == pytest.approx(math.sqrt(0.5))
    assert df == pytest.approx(4.0)  # Welch-Satterthwaite: two equal terms of 2 df each
    assert hi - m == pytest.approx(stats.t.ppf(0.975, 4) * se)
    m, lo, hi, se, df = mean_interval([40.0, 60.0], [1.0, 1.0], [math.inf, math.inf])
    assert math.isinf(df) and hi - m == pytest.approx(1.959964 * se, rel=1e-5)


def null_pvalues(rng, sims: int, seeds: int = 3, examples: int = 2000) -> np.ndarray:
    c = simulate(rng, sims, 2, seeds, examples)
    return p_value(*paired_difference(c[:, 0], c[:, 1]))


def test_paired_variance_estimate_is_unbiased():
    """Over 1,500 simulated null pairs (new examples and seeds each time) the mean estimated variance matches the
    actual spread of the difference: measured ratio 0.98. Dividing by n instead of n - 1 gives 0.69."""
    rng = np.random.default_rng(7)
    parts = [paired_difference(c[:, 0], c[:, 1]) for c in (simulate(rng, 500, 2, 3, 2000) for _ in range(3))]
    d = np.concatenate([p[0] for p in parts])
    se = np.concatenate([p[1] for p in parts])
    ratio = np.mean(se**2) / np.mean(d**2)  # the true difference is 0
    assert 0.88 <= ratio <= 1.12, f"estimated / actual variance {ratio:.2f}"


def test_paired_test_false_positive_rate_per_comparison():
    """1,000 pairs of variants from one distribution (3 seeds x 2,000 examples): at most 7 % called different at
    alpha 0.05 (the issue asks 200; 1,000 makes the bound 3 standard errors wide). Measured: 3.0 %."""
    rate = np.mean(null_pvalues(np.random.default_rng(3), 1000) <= 0.05)
    assert 0.02 <= rate <= 0.07, f"false-positive rate {rate:.3f}"


def test_paired_test_holm_family_wise_error():
    """200 families of 10 variants from one distribution, each against one shared reference, Holm-corrected:
    at most 7 % of the families mark any variant different. Measured: 1.5 %."""
    rng = np.random.default_rng(4)
    any_rejected = []
    for _ in range(4):  # 4 x 50 families, to bound memory
        c = simulate(rng, 50, 11, 3, 2000)
        p = p_value(*paired_difference(c[:, 1:], c[:, :1]))
        any_rejected.append(holm(p).any(-1))
    fwer = np.mean(np.concatenate(any_rejected))
    assert fwer <= 0.07, f"family-wise error {fwer:.3f}"


def test_paired_test_finds_a_three_point_effect():
    """A true +3 points with 3 seeds x 2,000 examples is found in most cases: measured power 0.67 (of 500 cases),
    with a per-seed accuracy std of about 0.9 points (checked here)."""
    rng = np.random.default_rng(5)
    shift = _solve(BASE_ACC + 0.03, BASE_LOGIT)
    assert expected_acc(shift) - expected_acc(0.0) == pytest.approx(0.03, abs=1e-6)
    c = simulate(rng, 500, 2, 3, 2000, shifts=[shift, 0.0])
    d, se, df = paired_difference(c[:, 0], c[:, 1])
    power = np.mean((p_value(d, se, df) <= 0.05) & (d > 0))
    assert d.mean() == pytest.approx(0.03, abs=0.003)
    assert 0.007 <= c[:, 1].mean(-1).std(-1, ddof=1).mean() <= 0.011  # the seed noise the power is quoted at
    assert power >= 0.6, f"power {power:.2f}"


def test_pairing_over_examples_pays():
    """Both variants see the same examples, so the difference varies less than either accuracy: the paired
    standard error is well below the unpaired one (an unpaired test in its place fails here)."""
    c = simulate(np.random.default_rng(6), 200, 2, 3, 2000)
    a, r = c[:, 0].astype(float), c[:, 1].astype(float)
    _, se, _ = paired_difference(a, r)
    seeds = a.mean(-1).var(-1, ddof=1) / 3 + r.mean(-1).var(-1, ddof=1) / 3
    within = (a.var(-2, ddof=1).mean(-1) + r.var(-2, ddof=1).mean(-1)) / 3 / 2000
    unpaired = np.sqrt(seeds + np.maximum((a.mean(-2).var(-1, ddof=1) + r.mean(-2).var(-1, ddof=1)) / 2000
                                          - within, 0))
    assert np.median(se / unpaired) < 0.8, f"paired / unpaired standard error {np.median(se / unpaired):.2f}"


def test_paired_test_needs_two_seeds_and_one_test_set():
    c = np.ones((2, 5), np.uint8)
    with pytest.raises(ValueError, match="2 seeds"):
        paired_difference(c[:1], c)
    with pytest.raises(ValueError, match="different test sets"):
        paired_difference(c, np.ones((2, 6)))


def test_welch_over_seeds_without_predictions():
    d, se, df = welch_seeds([0.40, 0.42, 0.44], [0.30, 0.31, 0.32])
    ref = stats.ttest_ind([0.40, 0.42, 0.44], [0.30, 0.31, 0.32], equal_var=False)
    assert float(p_value(d, se, df)) == pytest.approx(ref.pvalue)


def test_holm_against_hand_computed_steps():
    p = np.array([0.01, 0.04, 0.03, 0.005, np.nan])
    # m = 4: 0.005 <= 0.0125 yes, 0.01 <= 0.0167 yes, 0.03 <= 0.025 no -> stop
    assert holm(p).tolist() == [True, False, False, True, False]
    assert np.allclose(holm_adjusted(p)[:4], [0.03, 0.06, 0.06, 0.02]) and np.isnan(holm_adjusted(p)[4])
    assert holm(np.array([[0.001, 0.2], [0.03, 0.02], [0.04, 0.03]])).tolist() == [[True, False], [True, True],
                                                                          [False, False]]


def test_holm_matches_the_textbook_loop():
    rng = np.random.default_rng(8)
    p = rng.random((300, 6)) ** 3
    p[rng.random(p.shape) < 0.1] = np.nan
    for row, got in zip(p, holm(p), strict=True):
        valid = sorted((v, i) for i, v in enumerate(row) if not np.isnan(v))
        want = np.zeros(len(row), bool)
        for k, (v, i) in enumerate(valid):  # step down: stop at the first p above alpha / (m - k)
            if v > 0.05 / (len(valid) - k):
                break
            want[i] = True
        assert got.tolist() == want.tolist()


def test_kendall_tau_between_seed_halves():
    assert split_halves([2, 0, 1]) == ([0], [1, 2]) and split_halves([0, 1]) == ([0], [1])
    same = {v: {0: k, 1: k + 0.1} for k, v in enumerate("abcd")}
    assert half_tau(same)[0] == pytest.approx(1.0)
    flipped = {v: {0: k, 1: -k} for k, v in enumerate("abcd")}
    assert half_tau(flipped)[0] == pytest.approx(-1.0)
    tau, n, why = half_tau({"a": {0: 1.0}, "b": {0: 2.0, 1: 3.0}})
    assert math.isnan(tau) and n == 1 and "3 variants" in why


def test_kendall_tau_keeps_the_seeds_most_variants_share():
    """One variant run on other seeds is left out (and named) instead of emptying the common seed set; a half that
    ranks every variant equal gives an undefined tau that says why."""
    accs = {v: {0: k, 1: k + 0.1, 2: k + 0.2} for k, v in enumerate("abcd")}
    accs["e"] = {7: 0.0, 8: 9.0}
    tau, n, why = half_tau(accs)
    assert tau == pytest.approx(1.0) and n == 4 and "seeds [0] vs [1, 2]" in why and "e left out" in why
    partial = {v: {0: k, 1: k} for k, v in enumerate("abc")} | {"d": {0: 5.0, 1: 6.0, 2: 7.0}}
    tau, n, why = half_tau(partial)
    assert tau == pytest.approx(1.0) and n == 4 and why == "seeds [0] vs [1]"  # {0, 1}: shared by all four
    flat = {v: {0: 50.0, 1: k} for k, v in enumerate("abc")}
    tau, n, why = half_tau(flat)
    assert math.isnan(tau) and n == 3 and "one half ranks every variant equal" in why
    ties = {"a": {0: 1.0, 1: 1.0}, "b": {0: 1.0, 1: 2.0}, "c": {0: 2.0, 1: 3.0}}
    assert half_tau(ties)[0] == pytest.approx(stats.kendalltau([1, 1, 2], [1, 2, 3]).statistic)  # tau-b
