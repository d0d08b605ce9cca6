"""Simulated tables of 0/1 test outcomes whose truth is known, calibrated to the variance components of real records:
draws from the probit threshold model of :mod:`lra_bench.stats.probit` (fitted by its ``calibrate``)."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from lra_bench.stats.probit import Probit


def simulate(model: Probit, rng, sims: int, accs, seeds: int, examples: int) -> np.ndarray:
    """Correctness (sims, variants, seeds, examples) as uint8: ``sims`` tables, each with fresh test examples (drawn
    from the population) and fresh seeds; variant v's true accuracy is ``accs[v]`` (fractions)."""
    mu = stats.norm.ppf(np.asarray(accs, float)).astype(np.float32)
    v = len(mu)
    f32 = np.float32
    latent = rng.standard_normal((sims, v, seeds, examples), dtype=f32)
    latent *= f32(math.sqrt(max(1.0 - model.var_u - model.var_w - model.var_z, 0.0)))
    latent += f32(math.sqrt(model.var_u)) * rng.standard_normal((sims, 1, 1, examples), dtype=f32)
    latent += f32(math.sqrt(model.var_w)) * rng.standard_normal((sims, v, 1, examples), dtype=f32)
    latent += f32(math.sqrt(model.var_z)) * rng.standard_normal((sims, v, seeds, 1), dtype=f32)
    latent += mu[None, :, None, None]
    return (latent > 0).view(np.uint8)
