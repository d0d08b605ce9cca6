"""Every mark of the report checked on simulated tables whose truth is known, calibrated to the variance components
of the committed CPU sweep as it was before `quick` was re-sized (results/cpu/runs_before, 3 seeds: per task, the
seed, paired per-example and seed x example variance, pooled over the variants' pairs with softmax, through the
report's own ``detectable.task_noise``, each result under several names counted once as Table 1 does), drawn from
the probit model fitted to them (:mod:`lra_bench.stats.probit`, ``tests/helpers/simulate.py``):

* the cell intervals cover the true accuracy at their nominal 95 % (+-2 points);
* the confidence set for the best holds the true best in >= 95 % of tables;
* the two one-sided tests declare equivalence in <= 5 % of pairs whose true gap equals the margin;
* at the detectable gap the report prints, the Holm-corrected paired test finds the difference 80 % (+-5) of the
  time;
* P(rank 1) of the observed leader is not far above its real chance of being the best.
* with each mixer's own seed spread (the redone sweep's records, results/cpu/runs), Holm's family errs in
  <= 5 % of simulated null tables (a seed-level simulation through the harness's own degrees-of-freedom rule, in
  two scenarios: softmax's measured spread, and the smallest measured).

Seeded and vectorised: a few seconds each. The figures quoted in the docstrings were measured with these seeds.
"""

from __future__ import annotations

import numpy as np
import pytest

from lra_bench.reports.detectable import detectable, task_noise
from lra_bench.reports.same_predictions import drop_repeats
from lra_bench.reports.table1 import TASK_LABELS, load_runs, task_cells
from lra_bench.stats.best import best_set, covariance, pooled_covariance, rank_one_probability
from lra_bench.stats.intervals import cell_interval
from lra_bench.stats.paired import holm, p_value, paired_df, paired_difference, pairwise_paired, tost
from tests.conftest import ROOT
from tests.helpers.markdown import markdown_rows
from tests.helpers.redo import RUNS, RUNS_BEFORE, complete_tasks
from tests.helpers.simulate import simulate

RECORDS, REDO = RUNS_BEFORE, RUNS  # the calibration's 3-seed records; the redone sweep's (issue 46)
VARIANTS, SEEDS = 23, 3


@pytest.fixture(scope="module")
def calibration():
    """task -> (noise, seeds, examples, comparisons, cells' samples) of the committed CPU sweep."""
    if not RECORDS.is_dir():
        pytest.skip(f"{RECORDS} is not in this checkout")
    cells = drop_repeats(task_cells(load_runs(RECORDS)), "softmax")  # as Table 1: one result under several names once
    out = {}
    for task, g in cells.groupby("task"):
        samples = dict(zip(g.attention, g["sample"], strict=True))
        out[task] = (*task_noise(samples, "softmax"), samples)
    return out


@pytest.mark.parametrize("task", ["listops", "text", "image", "pathfinder"])
def test_cell_intervals_cover_the_true_accuracy_at_95_percent(calibration, task):
    """Cells at 4 accuracies 4 points apart around the task's mean accuracy, 300 each, 3 seeds on the task's test
    size, each cell with its own new test examples and seeds (cells sharing a test sample would err together, and
    1,200 of them would count as far fewer). Measured coverage: ListOps 94.8 %, Text 94.8 %, Image 95.3 %,
    Pathfinder 95.0 %. With the test-example term dropped from cell_interval (the seeds' spread alone, what Table 1
    printed before; measured on the calibration before repeats were counted once): 83.3 %, 81.9 %, 84.6 % and
    82.2 %."""
    noise, _, examples, _, _ = calibration[task]
    rng = np.random.default_rng(30)
    covered = []
    for acc in noise.acc + np.linspace(-0.02, 0.02, 4):
        for _ in range(3 if examples > 2000 else 1):
            c = simulate(noise.model, rng, 300 // (3 if examples > 2000 else 1), [acc], SEEDS, examples)
            _, lo, hi, _, _ = cell_interval(c[:, 0])
            covered.append((lo <= acc) & (acc <= hi))
    rate = float(np.mean(np.concatenate(covered)))
    assert 0.93 <= rate <= 0.97, f"{task}: 95 % intervals cover the true accuracy {rate:.3f} of the time"


def _best_sets(model, accs, tables: int, examples: int, rng, chunk: int = 50):
    """(membership (tables, V) of the confidence set, observed means (tables, V))."""
    members, means = [], []
    for start in range(0, tables, chunk):
        c = simulate(model, rng, min(chunk, tables - start), accs, SEEDS, examples)
        d, se, df = pairwise_paired(c)
        members.append(best_set(d, se, df))
        means.append(c.mean((-2, -1)))
    return np.concatenate(members), np.concatenate(means)


def test_confidence_set_for_the_best_holds_the_true_best(calibration):
    """ListOps noise, 23 variants whose true accuracies are spread evenly over 3 points (the issue's case): the set
    holds the true best in 99.3 % of 300 tables (the Bonferroni bound is conservative), with 21.6 variants on
    average -- the design cannot tell them apart. The observed best alone is the true best in 24 % of them; with
    the selection correction dropped from best_set (one-sided 5 % per comparison, not 5 % / 22) the set held it in
    89.7 % (on the calibration before repeats were counted once)."""
    noise, _, examples, _, _ = calibration["listops"]
    rng = np.random.default_rng(31)
    accs = noise.acc + np.linspace(-0.015, 0.015, VARIANTS)
    rng.shuffle(accs)
    members, means = _best_sets(noise.model, accs, 300, examples, rng)
    coverage = members[:, accs.argmax()].mean()
    assert coverage >= 0.95, f"the 95 % confidence set for the best holds it in {coverage:.3f} of the tables"
    assert (means.argmax(1) == accs.argmax()).mean() < 0.5  # the observed best alone would not do


def test_confidence_set_for_the_best_leaves_out_what_is_shown_below(calibration):
    """Image noise on 2,000 test examples, true accuracies spread evenly over 14 points: the set holds the true best
    in all of 100 tables and keeps 6.1 variants on average (6.0 with bigbird and longformer counted apart from
    flash; 5.9 calibrated on the 23-mixer sweep, before mega's image cells joined it) -- under 7, fewer than a third,
    and none from the lower half."""
    noise, _, examples, _, _ = calibration["image"]
    rng = np.random.default_rng(32)
    accs = noise.acc + np.linspace(-0.07, 0.07, VARIANTS)
    members, _ = _best_sets(noise.model, accs, 100, 2000, rng)
    assert members[:, accs.argmax()].mean() >= 0.95
    assert members.sum(1).mean() < 7 and not members[:, : VARIANTS // 2].any()


def test_equivalence_is_rarely_declared_at_the_margin(calibration):
    """Image noise (the task whose variants can be shown within 2 points at all) on 2,000 test examples, pairs 2
    points apart (the margin): the TOST declares equivalence in 3.9 % of 1,200 pairs (<= 5 %); pairs of equal
    accuracy: in 62 %."""
    noise, _, examples, _, _ = calibration["image"]
    rng = np.random.default_rng(33)
    rates = {}
    for gap in (0.02, 0.0):
        declared = []
        for _ in range(6):
            c = simulate(noise.model, rng, 200, [noise.acc + gap / 2, noise.acc - gap / 2], SEEDS, 2000)
            d, se, df = paired_difference(c[:, 0], c[:, 1])
            declared.append(tost(d * 100, se * 100, df, 2.0) <= 0.05)
        rates[gap] = float(np.mean(declared))
    assert rates[0.02] <= 0.05, f"equivalence declared in {rates[0.02]:.3f} of pairs 2 points apart"
    assert rates[0.0] >= 0.5, f"equivalence of equal variants shown in only {rates[0.0]:.3f}"


@pytest.mark.parametrize("task", ["listops", "text"])
def test_power_at_the_printed_detectable_gap_is_80_percent(calibration, task):
    """The reference and 21 other variants at one accuracy, one variant the printed detectable gap above (the pair
    straddling the task's mean accuracy, as the gap is computed), 23 variants x 3 seeds x the task's test size,
    Holm over the 22 tests against the reference (bigbird and longformer repeat flash: one result): the gap variant is
    marked better in 78.9 % (ListOps, gap 12.5) and 79.2 % (text, gap 9.6) of 800 tables. The gap is the one Table 1
    printed for these records (results/cpu before the redo; docs/benchmark.md's variance budget before quotes it)."""
    noise, seeds, examples, comparisons, samples = calibration[task]
    gap = detectable(samples, task, "softmax").gap / 100
    docs = (ROOT / "docs" / "benchmark.md").read_text()
    budget = {row[0]: row for row in markdown_rows(docs[docs.index("<!-- variance-budget:begin -->"):
                                                        docs.index("<!-- variance-budget:end -->")])[1:]}
    assert budget[TASK_LABELS[task]][4] == f"{100 * gap:.1f}", "the docs' variance budget before quotes another gap"
    rng = np.random.default_rng(34)
    accs = np.full(comparisons + 1, noise.acc - gap / 2)
    accs[1] = noise.acc + gap / 2
    found = []
    for _ in range(8):
        c = simulate(noise.model, rng, 100, accs, seeds, examples)
        d, se, df = paired_difference(c[:, 1:], c[:, :1])
        found.append(holm(p_value(d, se, df))[:, 0] & (d[:, 0] > 0))
    rate = float(np.mean(found))
    assert 0.75 <= rate <= 0.85, f"{task}: power {rate:.3f} at the printed detectable gap {100 * gap:.2f}"


def test_rank_one_probability_of_the_leader_is_not_inflated(calibration):
    """ListOps noise, 23 variants spread evenly over 3 points: the observed leader is the true best in 25 % of 300
    tables; its P(rank 1) averages 0.33 (empirical Bayes with the pooled noise: still somewhat above, within 0.15).
    The plug-in share of normal draws around the observed means with each cell's own variance gave it 0.43 against
    25 % in a trial run with other seeds."""
    noise, _, examples, _, _ = calibration["listops"]
    rng = np.random.default_rng(35)
    accs = noise.acc + np.linspace(-0.015, 0.015, VARIANTS)
    rng.shuffle(accs)
    said, right = [], []
    for _ in range(6):
        c = simulate(noise.model, rng, 50, accs, SEEDS, examples)
        _, se, _ = pairwise_paired(c)
        _, _, _, cell_se, _ = cell_interval(c)
        means = c.mean((-2, -1))
        for k in range(len(c)):
            p = rank_one_probability(means[k], pooled_covariance(covariance(cell_se[k] ** 2, se[k])), draws=4000)
            said.append(p.max())
            right.append(p.argmax() == accs.argmax())
    assert np.mean(said) - np.mean(right) <= 0.15, (np.mean(said), np.mean(right))


@pytest.fixture(scope="module")
def redo_cells():
    assert REDO.is_dir(), f"{REDO}: the redo's committed records are not there (moved? point REDO at them)"
    return drop_repeats(task_cells(load_runs(REDO), "quick"), "softmax")


def _null_tables(samples: dict, reference_seed_var: str, rng, tables: int = 100_000):
    """Seed-level null tables for ``samples`` (one task's cells) against softmax: (d, se, df) of the 22-odd paired
    tests, every true mean equal, each result's measured seed variance taken as its true one (softmax's own, or the
    smallest measured where ``reference_seed_var`` is "smallest"), each pair's measured per-example term (the paired
    variance less the two seed terms: the seed x example part is in the seed terms, as in ``paired_difference``),
    normal draws, the pairs' example parts independent (the harness's estimates correlate them, median 0.2-0.4, which
    moved the family-wise figure by < 0.02 points in a trial)."""
    ref, names = samples["softmax"], [a for a in samples if a != "softmax"]
    n, examples = len(ref.accs), ref.correct.shape[1]
    assert all(len(samples[a].accs) == n for a in names), "every result on the same seeds"
    seed = np.array([np.var(samples[a].accs / 100, ddof=1) for a in ["softmax", *names]])  # (1 + m,) fractions^2
    example = np.array([paired_difference(samples[a].correct, ref.correct)[1] ** 2 - (seed[0] + seed[1 + i]) / n
                        for i, a in enumerate(names)]).clip(0.0)  # (m,) the pair's per-example term
    if reference_seed_var == "smallest":
        seed[0] = seed.min()
    draws = rng.standard_normal((tables, len(names) + 1, n)) * np.sqrt(seed)[None, :, None]  # seeds' deviations
    v = draws.var(-1, ddof=1) / n                                                  # (tables, 1 + m) seed terms
    d = draws.mean(-1)[:, 1:] - draws.mean(-1)[:, :1] + rng.standard_normal((tables, len(names))) * np.sqrt(example)
    return d, np.sqrt(v[:, 1:] + v[:, :1] + example), paired_df(v[:, 1:], v[:, :1], example, n, n, examples)


@pytest.mark.parametrize("reference_seed_var", ["measured", "smallest"])
@pytest.mark.parametrize("task", ["listops", "text", "image"])
def test_holm_holds_the_family_wise_error_with_each_mixers_own_seed_spread(redo_cells, task, reference_seed_var):
    """The pooled calibration above gives every variant one seed spread; the redo's mixers differ (ListOps, 6 seeds:
    seed sd 0.24 to 2.76 points; text, 4 seeds: 0.06 to 0.90; image, 6 seeds: 0.24 to 2.16), and with very unequal
    spreads a Welch-Satterthwaite df makes one comparison's tail liberal. In the scenario of ``_null_tables``
    (100,000 tables, Holm over the 22 tests against softmax, the harness's df rule ``paired_df``), a false mark in
    2.9 % (ListOps), 2.2 % (text) and 2.6 % (image) of tables; with softmax's seed spread the smallest measured (the
    tests then lean most on the other side's few seeds) 4.1 %, 4.3 % and 3.3 %. One comparison is liberal: at Holm's
    first threshold (0.05 / 22 = 0.0023) up to 0.0042 (ListOps, compressed) and 0.0036 (text, linear), 0.0062 on
    text in the second scenario; at 5 % (Holm's last step: every other difference real) up to 5.4 % (lru) and 5.6 %
    (linear), 5.9 % in the second. Without the df cap (plain
    Welch-Satterthwaite) text's family errs in 7.7 % of tables (ListOps 4.7 %), and this test fails. Every variant
    exactly the margin (2 points) above softmax instead: a false ≈ in 2.2 % (ListOps) and 2.4 % (text) of tables,
    3.5 % and 4.2 % in the second scenario.
    Image: at Holm's first threshold up to 0.0037 (mlp_mixer; 0.0041 in the second scenario), at 5 % up to 5.3 %
    (performer), a false ≈ in 2.4 % (3.0 %).
    The claim held is the family's (<= 5 %); the tolerance of 6 % for one comparison at 5 % is what was measured, not
    a property of the test."""
    if TASK_LABELS[task] not in complete_tasks(REDO):
        pytest.skip(f"the redo's {task} records are not all in ({REDO}/README.md)")
    g = redo_cells[redo_cells.task == task]
    samples = dict(zip(g.attention, g["sample"], strict=True))
    d, se, df = _null_tables(samples, reference_seed_var, np.random.default_rng(46))
    p = p_value(d, se, df)
    family, last = float(np.mean(holm(p).any(1))), float((p <= 0.05).mean(0).max())
    assert family <= 0.05, f"{task}: Holm's family errs in {family:.4f} of null tables"
    assert last <= 0.06, f"{task}: one comparison at 5 % errs in {last:.4f} of null tables"
    at_margin = tost((d + 0.02) * 100, se * 100, df, 2.0)  # every variant exactly the margin (2 points) above
    assert np.mean(holm(at_margin).any(1)) <= 0.05
