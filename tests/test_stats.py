"""The statistics behind the reports, tested on simulated accuracies whose truth is known: the t interval's
coverage, Wilson's, the paired test's false-positive rate (per comparison and, with Holm, per family), its power
on a known 3-point effect with 3 seeds x 2,000 examples, and Kendall's tau between seed halves. Seeded and
vectorised (a few seconds)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from lra_bench.stats.best import best_set, pooled_covariance, rank_one_probability
from lra_bench.stats.intervals import (
    cell_interval,
    mean_interval,
    seeds_binomial_interval,
    t_interval,
    two_way_components,
    wilson,
)
from lra_bench.stats.paired import (
    holm,
    holm_adjusted,
    lower_bound,
    p_value,
    paired_difference,
    pairwise_paired,
    tost,
    welch_seeds,
)
from lra_bench.stats.power import Components, Noise, detectable_gap, power
from lra_bench.stats.probit import calibrate, orthant
from lra_bench.stats.rank_reliability import common_seeds, mean_reliability, same_top, seed_splits, split_tau

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


def simulate_correct(rng, sims: int, variants: int, seeds: int, examples: int) -> np.ndarray:
    return simulate(rng, sims, variants, seeds, examples)


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


def test_kendall_tau_averaged_over_every_split_of_the_seeds():
    """tau is averaged over every split of the seeds into halves (with 3 seeds: {0} | {1, 2}, {1} | {0, 2}, {2} |
    {0, 1}), each split once; with a jackknife interval over variants that holds the average."""
    assert seed_splits([2, 0, 1]) == [([0], [1, 2]), ([1], [0, 2]), ([2], [0, 1])]
    assert seed_splits([0, 1]) == [([0], [1])]
    assert seed_splits([0, 1, 2, 3]) == [([0, 1], [2, 3]), ([0, 2], [1, 3]), ([0, 3], [1, 2])]
    same = {v: {0: k, 1: k + 0.1, 2: k + 0.2} for k, v in enumerate("abcd")}
    assert split_tau(same)["tau"] == pytest.approx(1.0) and split_tau(same)["splits"] == 3
    flipped = {v: {0: k, 1: -k} for k, v in enumerate("abcd")}
    assert split_tau(flipped)["tau"] == pytest.approx(-1.0)
    rng = np.random.default_rng(0)
    accs = {f"v{i}": {s: i * 0.3 + rng.normal() for s in range(3)} for i in range(12)}
    got = split_tau(accs)
    by_hand = []
    for first, second in (([0], [1, 2]), ([1], [0, 2]), ([2], [0, 1])):
        x = [np.mean([accs[v][s] for s in first]) for v in sorted(accs)]
        y = [np.mean([accs[v][s] for s in second]) for v in sorted(accs)]
        by_hand.append(stats.kendalltau(x, y).statistic)
    assert got["tau"] == pytest.approx(np.mean(by_hand)) and got["low"] < got["tau"] < got["high"]
    out = split_tau({"a": {0: 1.0}, "b": {0: 2.0, 1: 3.0}})
    assert math.isnan(out["tau"]) and out["variants"] == 1 and "3 variants" in out["why"]


def test_kendall_tau_keeps_the_seeds_most_variants_share():
    """One variant run on other seeds is left out (and named) instead of emptying the common seed set; halves that
    rank every variant equal in every split give an undefined tau that says why."""
    accs = {v: {0: k, 1: k + 0.1, 2: k + 0.2} for k, v in enumerate("abcd")}
    accs["e"] = {7: 0.0, 8: 9.0}
    out = split_tau(accs)
    assert out["tau"] == pytest.approx(1.0) and out["variants"] == 4 and out["seeds"] == [0, 1, 2]
    assert out["left_out"] == ["e"]
    partial = {v: {0: k, 1: k} for k, v in enumerate("abc")} | {"d": {0: 5.0, 1: 6.0, 2: 7.0}}
    assert common_seeds(partial) == (["a", "b", "c", "d"], [0, 1], [])  # {0, 1}: shared by all four
    short = {v: {s: k + s for s in range(4)} for k, v in enumerate("abcd")} | {"e": {0: 1.0, 1: 2.0}}
    assert common_seeds(short) == (["a", "b", "c", "d"], [0, 1, 2, 3], ["e"])  # not everyone cut to e's two seeds
    flat = {v: {0: 50.0, 1: 50.0} for v in "abc"}
    out = split_tau(flat)
    assert math.isnan(out["tau"]) and out["variants"] == 3 and "every split" in out["why"]
    ties = {"a": {0: 1.0, 1: 1.0}, "b": {0: 1.0, 1: 2.0}, "c": {0: 2.0, 1: 3.0}}
    assert split_tau(ties)["tau"] == pytest.approx(stats.kendalltau([1, 1, 2], [1, 2, 3]).statistic)  # tau-b


def test_reliability_of_the_k_seed_mean_by_hand_and_its_coverage():
    """ICC(1, k) = 1 - MS_within / MS_between with the exact F interval (McGraw & Wong 1996), against a hand
    computation; on 2,000 simulated one-way layouts (23 variants x 3 seeds) the interval holds the true reliability
    95 % of the time (measured 94.7 %)."""
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [2.0, 2.0, 5.0], [7.0, 6.0, 8.0]])
    accs = {f"v{i}": dict(enumerate(row)) for i, row in enumerate(x)}
    msb = 3 * x.mean(1).var(ddof=1)
    msw = x.var(1, ddof=1).mean()
    got = mean_reliability(accs)
    assert got["icc"] == pytest.approx(1 - msw / msb) and got["k"] == 3 and got["variants"] == 4
    f = msb / msw
    assert got["low"] == pytest.approx(1 - stats.f.ppf(0.975, 3, 8) / f)
    assert got["high"] == pytest.approx(1 - 1 / (f * stats.f.ppf(0.975, 8, 3)))
    rng = np.random.default_rng(11)
    tau2, sigma2, k = 1.0, 3.0, 3
    truth = tau2 / (tau2 + sigma2 / k)
    sims = rng.normal(0, 1, (2000, 23, 1)) + rng.normal(0, math.sqrt(sigma2), (2000, 23, k))
    msb = k * sims.mean(2).var(1, ddof=1)
    msw = sims.var(2, ddof=1).mean(1)
    f = msb / msw
    lo, hi = 1 - stats.f.ppf(0.975, 22, 46) / f, 1 - 1 / (f * stats.f.ppf(0.975, 46, 22))
    covered = np.mean((lo <= truth) & (truth <= hi))
    assert 0.93 <= covered <= 0.97, covered
    one = mean_reliability({f"v{i}": dict(enumerate(row)) for i, row in enumerate(sims[0])})
    assert (one["low"], one["high"]) == pytest.approx((lo[0], hi[0]))  # the library gives the same interval


def test_same_top_is_certain_when_variants_are_far_apart_and_chance_when_equal():
    apart = {f"v{i}": {s: 10.0 * i + 0.1 * s for s in range(3)} for i in range(6)}
    assert same_top(apart) == pytest.approx((1.0, 1.0), abs=0.01)
    rng = np.random.default_rng(3)
    equal = {f"v{i}": {s: 50.0 + rng.normal(0, 2) for s in range(3)} for i in range(10)}
    first, three = same_top(equal)  # no real differences: the reliability is clipped at 0, a rerun's top is noise
    assert mean_reliability(equal)["icc"] < 0.3
    assert first == pytest.approx(0.1, abs=0.05) and three < 0.05
    first, three = same_top({"a": {0: 1.0, 1: 2.0}, "b": {0: 3.0, 1: 4.0}, "c": {0: 9.0, 1: 9.5}})
    assert first > 0.9 and math.isnan(three)  # a top-3 set of 3 variants says nothing


def test_cell_interval_by_the_mean_squares_of_the_seeds_x_examples_design():
    """The cell's variance is var_s(acc_s) / S + max(var_i(cbar_i) / N - MS_res / (S N), 0), t with the
    Welch-Satterthwaite df of its two terms (S - 1 and N - 1): checked against a direct computation (on seeds that
    differ, so the estimate is above the floor p~ (1 - p~) / (S N))."""
    rng = np.random.default_rng(20)
    c = (rng.random((3, 500)) < rng.uniform(0.2, 0.9, 500) + np.array([[-0.08], [0.0], [0.08]])).astype(np.uint8)
    acc, cbar = c.mean(1), c.mean(0)
    resid = ((c - acc[:, None] - cbar[None, :] + c.mean()) ** 2).sum() / (2 * 499)
    seed_term, example_term = acc.var(ddof=1) / 3, max(cbar.var(ddof=1) / 500 - resid / 1500, 0)
    df = (seed_term + example_term) ** 2 / (seed_term**2 / 2 + example_term**2 / 499)
    mean, lo, hi, se, got_df = cell_interval(c)
    assert mean == pytest.approx(c.mean()) and se == pytest.approx(math.sqrt(seed_term + example_term))
    assert got_df == pytest.approx(df) and hi - mean == pytest.approx(stats.t.ppf(0.975, df) * se)
    seed, example, residual = two_way_components(c)
    assert residual == pytest.approx(resid) and example == pytest.approx(max(cbar.var(ddof=1) - resid / 3, 0))
    assert seed == pytest.approx(max(acc.var(ddof=1) - resid / 500, 0))


def test_cell_interval_is_never_of_zero_width_and_stays_in_0_100():
    """Seven Pathfinder cells printed [50.55, 50.55]: every seed predicted the majority class. Test sampling alone
    gives such a cell the binomial width; a cell right on every example keeps a width (the Wilson centre's floor)
    and is clipped at 1."""
    majority = np.tile(np.arange(2000) < 1011, (3, 1))                      # 50.55 % right, the same on all seeds
    mean, lo, hi, se, df = cell_interval(majority)
    assert mean == pytest.approx(0.5055) and hi - lo == pytest.approx(2 * 1.96 * math.sqrt(0.5055 * 0.4945 / 1999),
                                                                      rel=0.01)
    mean, lo, hi, se, df = cell_interval(np.ones((3, 100)))
    assert hi == 1.0 and lo < 1.0 and se > 0
    mean, lo, hi, se, df = cell_interval(np.zeros((2, 50)))
    assert lo == 0.0 and hi > 0.01
    m, lo, hi, se, df = seeds_binomial_interval([0.36, 0.38], 100)  # no predictions: the binomial bound
    var = 0.0002 / 2 + 0.37 * 0.63 / 100
    assert se == pytest.approx(math.sqrt(var))
    assert df == pytest.approx(var**2 / ((0.0002 / 2) ** 2 / 1 + (0.37 * 0.63 / 100) ** 2 / 99))


def test_pairwise_paired_equals_the_pair_by_pair_test():
    c = simulate_correct(np.random.default_rng(21), 2, 5, 3, 400)
    d, se, df = pairwise_paired(c)
    for i, j in ((0, 1), (3, 2), (4, 0)):
        want = paired_difference(c[:, i], c[:, j])
        np.testing.assert_allclose(d[:, i, j], want[0])
        np.testing.assert_allclose(se[:, i, j], want[1])
        np.testing.assert_allclose(df[:, i, j], want[2])
    assert (np.diagonal(d, axis1=1, axis2=2) == 0).all() and (np.diagonal(se, axis1=1, axis2=2) == 0).all()


def test_equivalence_and_non_inferiority_by_hand():
    """TOST: the larger of the two one-sided t tests' p; the lower bound: d - t_0.95 se."""
    d, se, df = 0.5, 0.6, 4.0
    by_hand = max(stats.t.sf((d + 2) / se, df), stats.t.sf((2 - d) / se, df))
    assert float(tost(d, se, df, 2.0)) == pytest.approx(by_hand)
    assert float(tost(-d, se, df, 2.0)) == pytest.approx(by_hand)  # symmetric
    assert float(tost(3.0, se, df, 2.0)) > 0.5  # outside the margin: never equivalent
    assert float(lower_bound(d, se, df)) == pytest.approx(d - stats.t.ppf(0.95, df) * se)
    # the S4D ListOps rule: a mean gap of -0.96 with a standard error of 0.53 meets "-1" by its point estimate only
    assert float(lower_bound(-0.96, 0.53, math.inf)) < -1.0


def test_confidence_set_for_the_best_by_hand():
    """Variant i leaves the set only when some j is shown above it at 5 % / (V - 1), one-sided."""
    means = np.array([10.0, 9.0, 5.0])
    se = np.full((3, 3), 1.0)
    np.fill_diagonal(se, 0.0)
    d = means[:, None] - means[None, :]
    df = np.full((3, 3), math.inf)
    assert best_set(d, se, df).tolist() == [True, True, False]  # 10 - 5 = 5 > z_{0.975} = 1.96; 10 - 9 = 1 is not
    assert best_set(d, se * 2.6, df).tolist() == [True, True, True]  # 5 / 2.6 = 1.92 < 1.96
    se_nan = se.copy()
    se_nan[0, 2] = se_nan[2, 0] = np.nan  # an untested pair excludes nothing
    se_nan[1, 2] = se_nan[2, 1] = np.nan
    assert best_set(d, se_nan, df).tolist() == [True, True, True]


def test_rank_one_probability_shrinks_toward_the_average():
    cov = pooled_covariance(np.diag([1.0, 4.0, 1.0]) + 0.5)
    assert np.allclose(np.diag(cov), 2.5) and cov[0, 1] == pytest.approx(0.5)
    assert rank_one_probability([1.0, 1.2, 0.9], np.eye(3)).tolist() == pytest.approx([1 / 3] * 3)  # no real spread
    far = rank_one_probability([0.0, 20.0, 40.0], np.eye(3))
    assert far[2] > 0.99
    p = rank_one_probability(np.linspace(0, 3, 10), np.eye(10))
    assert p.sum() == pytest.approx(1.0) and p[-1] < 0.5 and p.argmax() == 9  # shrunk: not crowned for its lead


def test_rank_one_probability_does_not_depend_on_the_eigenvectors_lapack_picks(monkeypatch):
    """The pooled covariance has one eigenvalue repeated V - 1 times, so LAPACK may return any orthonormal basis of
    that eigenspace, and different hosts did (P(rank 1) 0.0588 against 0.0581 for one committed table). The draws go
    through the symmetric square root, which every such basis gives alike: a rotated basis leaves P(rank 1) as is."""
    means = [36.9, 39.0, 32.5, 35.1, 38.2]
    cov = pooled_covariance(np.diag([2.0, 3.5, 1.5, 2.5, 3.0]) + 0.7)
    before = rank_one_probability(means, cov)
    eigh = np.linalg.eigh

    def rotated(a):
        w, q = eigh(a)
        repeated = np.flatnonzero(np.isclose(w, np.median(w)))
        assert len(repeated) == len(means) - 1  # the repeated eigenvalue this test is about
        turn, _ = np.linalg.qr(np.random.default_rng(7).standard_normal((len(repeated), len(repeated))))
        q = q.copy()
        q[:, repeated] = q[:, repeated] @ turn
        return w, q

    monkeypatch.setattr(np.linalg, "eigh", rotated)
    after = rank_one_probability(means, cov)
    assert after.tolist() == before.tolist()
    assert not np.allclose(rotated(cov)[1], eigh(cov)[1])  # the basis did change


def test_probit_model_orthants_and_calibration():
    """Owen's T orthant probabilities against scipy's integration; the fitted model gives back the components it
    was fitted to; a paired component above twice the example one fits no model."""
    for h, k, r in ((0.3, 0.5, 0.4), (-0.4, 0.9, 0.9), (1.2, -1.5, 0.01), (0.0, 0.3, 0.3), (-0.2, -0.7, 0.8)):
        ref = stats.multivariate_normal([0, 0], [[1, r], [r, 1]]).cdf([h, k])
        assert orthant(h, k, r) == pytest.approx(ref, abs=1e-6)
    model = calibrate(0.34, 1.5e-4, 0.0085, 0.0725)
    seed, example, residual = model.variant(0.34)
    assert (seed, residual, model.paired(0.34, 0.34)) == pytest.approx((1.5e-4, 0.0725, 0.0085), rel=1e-6)
    assert seed + example + residual == pytest.approx(0.34 * 0.66)
    assert model.paired(0.40, 0.28) > model.paired(0.34, 0.34)  # variants far apart differ on more examples
    with pytest.raises(ValueError, match="fit no probit model"):
        calibrate(0.5, 1e-5, 0.3, 0.2)


def test_detectable_gap_is_where_the_power_is_80_percent():
    noise = Noise.fit(0.34, Components(1.5e-4, 0.0085, 0.0725))
    gap = detectable_gap(noise, 3, 1000, 22)
    assert power(gap, noise, 3, 1000, 22) == pytest.approx(0.8, abs=1e-4)
    assert detectable_gap(noise, 10, 1000, 22) < gap / 2  # more seeds: a smaller detectable gap
    assert detectable_gap(noise, 3, 1000, 1) < gap  # fewer comparisons: a looser threshold
    assert power(0.0, noise, 3, 1000, 1) < 0.05 / 2 + 0.005  # no gap: the test's own size, one direction
    fixed = Noise(0.34, Components(1.5e-4, 0.0085, 0.0725), None)  # components held fixed: no model
    assert detectable_gap(fixed, 3, 1000, 22) > gap  # the model's growing paired term makes big gaps easier
