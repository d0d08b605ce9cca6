"""LRA's learning-rate schedules, checked against the formulas of train_utils.py, and s4's cosine to zero."""

import math

import pytest

from lra_bench.train import loop
from lra_bench.train.schedules import lr_factor
from tests.test_training import settings, tiny_model


def test_rsqrt_matches_lra():
    warmup = 1000
    assert lr_factor(0, "rsqrt", warmup, 5000) == 0.0
    assert lr_factor(500, "rsqrt", warmup, 5000) == pytest.approx(0.5 / math.sqrt(1000))
    assert lr_factor(1000, "rsqrt", warmup, 5000) == pytest.approx(1 / math.sqrt(1000))  # peak 0.05*this=1.58e-3
    assert lr_factor(4000, "rsqrt", warmup, 5000) == pytest.approx(1 / math.sqrt(4000))


def test_cosine_matches_lra():
    warmup, total = 100, 1000
    assert lr_factor(50, "cosine", warmup, total) == pytest.approx(0.5)
    assert lr_factor(100, "cosine", warmup, total) == pytest.approx(1.0)
    assert lr_factor(600, "cosine", warmup, total) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.5)))
    assert lr_factor(1100, "cosine", warmup, total) == pytest.approx(1.0)  # (.. % 1): a new cycle


def test_constant_and_unknown():
    assert lr_factor(5, "constant", 10, 100) == 0.5
    assert lr_factor(50, "constant", 0, 100) == 1.0
    with pytest.raises(ValueError):
        lr_factor(1, "linear", 10, 100)


def test_cosine_to_zero_is_s4s_cosine_warmup():
    """profile=s4's schedule, the s4 repository's ``cosine_warmup`` (transformers' get_cosine_schedule_with_warmup):
    linear warm-up, then half a cosine over the steps left, zero at the horizon. LRA's cosine decays over the whole
    horizon counted from the end of the warm-up, so with 10 % warm-up it is at 0.578 where s4's is at 0.5 and ends
    at 0.0245, not 0."""
    warmup, total = 18000, 180000  # s4-cifar.yaml
    assert lr_factor(0, "cosine_to_zero", warmup, total) == 0.0
    assert lr_factor(9000, "cosine_to_zero", warmup, total) == pytest.approx(0.5)
    assert lr_factor(warmup, "cosine_to_zero", warmup, total) == 1.0
    middle = (warmup + total) // 2
    assert lr_factor(middle, "cosine_to_zero", warmup, total) == pytest.approx(0.5)
    assert lr_factor(middle, "cosine", warmup, total) == pytest.approx(0.578, abs=1e-3)
    assert lr_factor(total, "cosine_to_zero", warmup, total) == pytest.approx(0.0, abs=1e-12)
    assert lr_factor(total, "cosine", warmup, total) == pytest.approx(0.0245, abs=1e-4)
    for step in (20000, 60000, 150000):  # the closed form, step by step
        expected = 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))
        assert lr_factor(step, "cosine_to_zero", warmup, total) == pytest.approx(expected)
    # s4's Retrieval: 45,960 steps (20 epochs) of a 50,000-step schedule end above zero
    assert lr_factor(45960, "cosine_to_zero", 5000, 50000) == pytest.approx(0.019756, abs=1e-6)


def test_the_schedule_horizon_defaults_to_max_steps_and_can_be_longer():
    """``trainer.schedule_steps`` is the horizon the trainer's scheduler uses; null = ``max_steps``."""
    def rate_after(steps: int, **over) -> float:
        optimizer, scheduler = loop.make_optimizer(tiny_model(), settings(lr=1.0, schedule="cosine_to_zero",
                                                                          warmup_steps=2, **over))
        for _ in range(steps):
            optimizer.step()
            scheduler.step()
        return optimizer.param_groups[0]["lr"]

    assert rate_after(12, max_steps=12) == pytest.approx(0.0, abs=1e-12)
    assert rate_after(12, max_steps=12, schedule_steps=22) == pytest.approx(0.5 * (1 + math.cos(math.pi / 2)))
