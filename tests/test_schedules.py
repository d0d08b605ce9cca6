"""LRA's learning-rate schedules, checked against the formulas of train_utils.py."""

import math

import pytest

from lra_bench.train.schedules import lr_factor


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


def test_linear_decay_matches_fairseq():
    """fairseq's linear_decay (the Mega LRA recipes): linear warm-up, then linear decay to 0 at the last update."""
    warmup, total = 100, 1000
    assert lr_factor(50, "linear_decay", warmup, total) == pytest.approx(0.5)
    assert lr_factor(100, "linear_decay", warmup, total) == pytest.approx(1.0)
    assert lr_factor(550, "linear_decay", warmup, total) == pytest.approx(0.5)
    assert lr_factor(1000, "linear_decay", warmup, total) == 0.0
    assert lr_factor(1200, "linear_decay", warmup, total) == 0.0
