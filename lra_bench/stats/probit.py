"""A model of 0/1 test outcomes fitted to a task's variance components, so that the noise of a variant can follow its
accuracy: the probit threshold model.

Variant v, seed s and test example i give the latent

    L = mu_v + sqrt(var_u) u_i + sqrt(var_w) w_vi + sqrt(var_z) z_vs + sqrt(1 - var_u - var_w - var_z) e_vsi

(all standard normal) and the example is right when L > 0: u is the difficulty every variant shares, w a variant's
own per-example deviation, z the training seed's shift. The variant's true accuracy (over seeds and the population
of test examples) is Phi(mu_v), and every variance component is a bivariate-normal orthant probability of the
latent variance two outcomes share:

* seed (two examples, one seed): Phi2(mu, mu; var_z) - p^2;
* example (one example, two seeds): Phi2(mu, mu; var_u + var_w) - p^2;
* residual: p (1 - p) - seed - example (a 0/1 outcome's variance is the sum of the three);
* paired, of variants a and r (one example, one seed each): example_a + example_r - 2 (Phi2(mu_a, mu_r; var_u) -
  p_a p_r).

:func:`calibrate` solves the three latent variances from a task's measured seed, paired and residual components at
its mean accuracy; :meth:`Probit.pair` then gives the components of two variants ``gap`` apart. A variant 15 points
better than another differs from it on more examples than two variants of equal accuracy do -- the paired
component grows with the gap -- which a power calculation that holds the components fixed leaves out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import optimize, special, stats

_EDGE = 1e-12


def orthant(h: float, k: float, rho: float) -> float:
    """Phi2(h, k; rho) = P(X <= h, Y <= k) for standard normals with correlation ``rho`` in [0, 1), by Owen's T
    function (exact to rounding, unlike numerical integration at the 1e-5 scale of a seed component)."""
    if rho == 0:
        return float(stats.norm.cdf(h) * stats.norm.cdf(k))
    h = h if h != 0 else _EDGE
    k = k if k != 0 else _EDGE
    s = math.sqrt(1 - rho * rho)
    beta = 0.0 if h * k > 0 else 0.5
    return float(0.5 * stats.norm.cdf(h) + 0.5 * stats.norm.cdf(k) - special.owens_t(h, (k - rho * h) / (h * s))
                 - special.owens_t(k, (h - rho * k) / (k * s)) - beta)


@dataclass(frozen=True)
class Probit:
    """The fitted model: the task's mean accuracy ``acc`` and the latent variances of the shared difficulty
    (``var_u``), a variant's own per-example deviation (``var_w``) and the seed (``var_z``)."""

    acc: float
    var_u: float
    var_w: float
    var_z: float

    def variant(self, acc: float) -> tuple[float, float, float]:
        """(seed, example, residual) components of a variant whose true accuracy is ``acc``."""
        mu = float(stats.norm.ppf(acc))
        seed = orthant(mu, mu, self.var_z) - acc * acc
        example = orthant(mu, mu, self.var_u + self.var_w) - acc * acc
        return seed, example, acc * (1 - acc) - seed - example

    def paired(self, acc_a: float, acc_r: float) -> float:
        """The paired component of two variants with true accuracies ``acc_a`` and ``acc_r``."""
        ex_a, ex_r = self.variant(acc_a)[1], self.variant(acc_r)[1]
        cross = orthant(float(stats.norm.ppf(acc_a)), float(stats.norm.ppf(acc_r)), self.var_u) - acc_a * acc_r
        return ex_a + ex_r - 2 * cross


def calibrate(acc: float, seed: float, paired: float, residual: float) -> Probit:
    """The :class:`Probit` whose components at accuracy ``acc`` (fraction, two variants of equal accuracy) are
    ``seed``, ``paired`` and ``residual`` (fractions squared). ValueError when no such model exists (e.g. a paired
    component above twice the example one: variants that agree less than chance)."""
    if not 0 < acc < 1:
        raise ValueError(f"accuracy {acc} must lie strictly between 0 and 1")
    mu = float(stats.norm.ppf(acc))
    p2 = acc * acc
    example = acc * (1 - acc) - seed - residual

    def solve(target: float) -> float:  # the shared latent variance whose orthant probability gives target
        if target <= 0:
            return 0.0
        top = orthant(mu, mu, 1 - 1e-9) - p2
        if target >= top:
            raise ValueError(f"component {target:.4g} above the largest possible {top:.4g} at accuracy {acc}")
        return float(optimize.brentq(lambda r: orthant(mu, mu, r) - p2 - target, 0.0, 1 - 1e-9, xtol=1e-13))

    if example - paired / 2 < 0:
        raise ValueError(f"components seed {seed:.4g}, paired {paired:.4g}, residual {residual:.4g} fit no probit "
                         f"model at accuracy {acc:.4f}: the implied example component {example:.4g} is below "
                         "paired / 2")
    var_z, var_uw, var_u = solve(seed), solve(example), solve(example - paired / 2)
    if var_uw + var_z >= 1:
        raise ValueError(f"components seed {seed:.4g}, paired {paired:.4g}, residual {residual:.4g} fit no probit "
                         f"model at accuracy {acc:.4f}")
    return Probit(acc, var_u, var_uw - var_u, var_z)
