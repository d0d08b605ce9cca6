"""Runs at chance: a run whose test predictions are all one class, or whose accuracy cannot be told apart from the
test set's majority-class rate (its own 95 % test-sampling interval, Wilson over its test examples, contains that
rate), is marked "collapsed" -- it learned nothing a constant guess would not score. A cell is at chance when every
one of its ok runs collapsed or its interval contains the majority rate; a task is at chance when every cell that
ran it is: it is shown, but left out of the ranking average (the LRA score of the chart)."""

from __future__ import annotations

import math

import numpy as np

from lra_bench.stats.intervals import wilson
from lra_bench.store import predictions

ONE_CLASS, AT_MAJORITY = "one predicted class", "within its interval of the majority rate"


def collapsed(acc: float, test_examples: float, majority: float, field: dict | None) -> str:
    """Why a run (test accuracy and majority rate as fractions, its ``test_predictions`` field or None) collapsed,
    or '' when it did not."""
    if isinstance(field, dict):
        try:
            predicted, _ = predictions.decode(field)
        except ValueError:
            predicted = None
        if predicted is not None and len(predicted) and len(np.unique(predicted)) == 1:
            return ONE_CLASS
    if all(math.isfinite(v) for v in (acc, test_examples, majority)) and test_examples > 0:
        lo, hi = wilson(round(acc * test_examples), int(test_examples))
        if lo <= majority <= hi:
            return AT_MAJORITY
    return ""


def cell_at_chance(n: int, n_collapsed: int, lo: float, hi: float, majority: float) -> bool:
    """A cell (n ok runs, n_collapsed of them collapsed; interval lo..hi and majority rate in %) is at chance when
    every run collapsed or its interval contains the majority rate."""
    if n == 0:
        return False
    return n_collapsed == n or (math.isfinite(majority) and math.isfinite(lo) and lo <= majority <= hi)
