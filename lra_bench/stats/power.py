"""What a design (seeds per variant, test examples) can detect: the power of the paired test
(:func:`lra_bench.stats.paired.paired_difference`) and the smallest gap it finds with a given power, from the variance
components of the records.

For two variants compared on the same N test examples with S seeds each, the difference of their mean accuracies has
the variance

    Var(d) = (seed_a + seed_r) / S + paired / N + (residual_a + residual_r) / (S N)

with ``seed`` the pure seed-to-seed variance of one variant's accuracy, ``paired`` the variance over test examples of
the difference of the two variants' per-example success rates, and ``residual`` the seed x example interaction (the
components of :func:`lra_bench.stats.intervals.two_way_components`; :func:`pair_components` for one pair,
:func:`pooled` over a task's pairs). The components of two variants a gap apart come from the probit model fitted to
the task's pooled components (:mod:`lra_bench.stats.probit`): the two variants straddle the task's mean accuracy,
gap / 2 above and below it, and the noise of each follows its accuracy (where no probit model fits, the pooled
components are held fixed).

The paired test estimates the two seed terms (S - 1 degrees of freedom each) and the example term (N - 1) and uses t
with their Welch-Satterthwaite degrees of freedom capped at 2 S - 2. Its power is computed for exactly that procedure
in the normal model: the three estimated terms are scaled chi-squares independent of d ~ N(gap, Var(d)), so given
them the test rejects in the gap's direction with probability Phi((gap - q) / sqrt(Var(d))), q = t_crit(df^) se^;
the power is the mean of that over 20,000 fixed draws of the estimates. (A noncentral t with one df is off by up to
10 points of power when the example term dominates, since the estimate then varies far less than a 2 S - 2 df
chi-square; holding the components fixed at a 15-point gap, by 9.)

With m variants tested against one reference and Holm's correction, the first (strictest) step compares the
smallest p with alpha / m: the detectable gap is computed there, the power to find one real difference among
variants that do not differ (Holm's later steps only loosen the threshold once a difference has been found).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from lra_bench.stats.intervals import two_way_components
from lra_bench.stats.paired import ALPHA
from lra_bench.stats.probit import Probit, calibrate

POWER = 0.8
DRAWS = 20_000


@dataclass(frozen=True)
class Components:
    """Variance components of one task (fractions squared), for two variants of equal accuracy: ``seed`` per
    variant, ``paired`` per test example of their difference, ``residual`` seed x example per variant."""

    seed: float
    paired: float
    residual: float

    def variance(self, seeds: int, examples: int) -> float:
        """Var of a difference of two variants' mean accuracies with ``seeds`` each on ``examples``."""
        return 2 * self.seed / seeds + self.paired / examples + 2 * self.residual / (seeds * examples)


@dataclass(frozen=True)
class Noise:
    """A task's noise: its mean accuracy ``acc`` (fraction), its pooled ``components`` and the probit model fitted
    to them (None when none fits)."""

    acc: float
    components: Components
    model: Probit | None

    @classmethod
    def fit(cls, acc: float, components: Components) -> Noise:
        try:
            model = calibrate(acc, components.seed, components.paired, components.residual)
        except ValueError:
            model = None
        return cls(acc, components, model)

    def terms(self, gap: float, seeds: int, examples: int) -> tuple[float, float, float]:
        """The expected (seed term of the better variant, of the worse, example term) of two variants ``gap``
        apart around the task's mean accuracy, with ``seeds`` each on ``examples``."""
        hi, lo = self.acc + gap / 2, self.acc - gap / 2
        if self.model is not None and 0 < lo and hi < 1:
            (seed_a, _, res_a), (seed_r, _, res_r) = self.model.variant(hi), self.model.variant(lo)
            paired = self.model.paired(hi, lo)
        else:
            c = self.components
            seed_a = seed_r = c.seed
            res_a = res_r = c.residual
            paired = c.paired
        return (seed_a / seeds + res_a / (seeds * examples), seed_r / seeds + res_r / (seeds * examples),
                paired / examples)


def pair_components(a, r) -> Components:
    """The components of one pair of correctness matrices ``a`` (S_A, N) and ``r`` (S_R, N) on one test set: seed and
    residual the mean of the two variants' (:func:`two_way_components`), paired = var_i(cbar_A - cbar_R) minus its
    residual share (e_A / S_A + e_R / S_R), clipped at 0."""
    a, r = np.asarray(a, np.float64), np.asarray(r, np.float64)
    seed_a, _, res_a = two_way_components(a)
    seed_r, _, res_r = two_way_components(r)
    diff = a.mean(0) - r.mean(0)
    paired = max(float(diff.var(ddof=1)) - res_a / len(a) - res_r / len(r), 0.0)
    return Components(float(seed_a + seed_r) / 2, paired, float(res_a + res_r) / 2)


def pooled(parts: list[Components]) -> Components:
    """The mean of each component over ``parts`` (a task's pairs)."""
    if not parts:
        raise ValueError("no pair to pool variance components from")
    return Components(*(float(np.mean([getattr(c, f) for c in parts])) for f in ("seed", "paired", "residual")))


class _Draws:
    """Fixed standardised draws of the three estimated terms (scaled chi-squares of S - 1, S - 1, N - 1 df)."""

    def __init__(self, seeds: int, examples: int):
        if seeds < 2 or examples < 2:
            raise ValueError(f"the paired test needs >= 2 seeds and >= 2 examples, got {seeds} and {examples}")
        rng = np.random.default_rng(0)
        self.seeds, self.examples = seeds, examples
        self.x = [rng.chisquare(seeds - 1, DRAWS) / (seeds - 1), rng.chisquare(seeds - 1, DRAWS) / (seeds - 1),
                  rng.chisquare(examples - 1, DRAWS) / (examples - 1)]

    def power(self, gap: float, noise: Noise, comparisons: int, alpha: float) -> float:
        terms = noise.terms(gap, self.seeds, self.examples)
        sd = math.sqrt(sum(terms))
        if sd == 0:
            return float(gap > 0)
        est = [t * x for t, x in zip(terms, self.x, strict=True)]
        var = sum(est)
        denom = (est[0] ** 2 + est[1] ** 2) / (self.seeds - 1) + est[2] ** 2 / (self.examples - 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            df = np.where(denom > 0, var**2 / np.where(denom > 0, denom, 1.0), np.inf)
        df = np.clip(df, self.seeds - 1, 2 * self.seeds - 2)  # Satterthwaite's df is at least the smallest term's
        grid = np.linspace(self.seeds - 1, 2 * self.seeds - 2, 256)
        q = np.interp(df, grid, stats.t.ppf(1 - alpha / comparisons / 2, grid)) * np.sqrt(var)
        return float(np.mean(stats.norm.cdf((gap - q) / sd)))


def power(gap: float, noise: Noise, seeds: int, examples: int, comparisons: int = 1, alpha: float = ALPHA) -> float:
    """Probability that the paired test at alpha / comparisons (two-sided) finds a true difference ``gap``
    (fraction, >= 0) between two variants of the task ``noise`` describes, in its direction."""
    return _Draws(seeds, examples).power(abs(gap), noise, comparisons, alpha)


def detectable_gap(noise: Noise, seeds: int, examples: int, comparisons: int = 1, alpha: float = ALPHA,
                   target: float = POWER) -> float:
    """The smallest true gap (fraction) the design finds with probability ``target`` (80 %): the minimum detectable
    effect at alpha / comparisons, Holm's first step. inf when no gap that fits in [0, 1] around the task's mean
    accuracy is found that often."""
    draws = _Draws(seeds, examples)
    top = 2 * min(noise.acc, 1 - noise.acc) * (1 - 1e-9) if noise.model is not None else 1.0
    if draws.power(top, noise, comparisons, alpha) < target:
        return math.inf
    return float(optimize.brentq(lambda g: draws.power(g, noise, comparisons, alpha) - target, 0.0, top,
                                 xtol=1e-7))
