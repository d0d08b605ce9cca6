"""Variants that repeat another's predictions on every seed are named as one result (BigBird and Longformer run
plain attention at <= 256 tokens, bit-identically to flash: three bubbles, one accuracy)."""

from __future__ import annotations

import numpy as np

from lra_bench.reports.identical import identical_groups, identical_note
from lra_bench.reports.table1 import load_runs
from lra_bench.store.predictions import encode
from tests.test_report import record, write

LABELS = np.arange(40) % 4


def predicted(seed: int, flip: int | None = None) -> np.ndarray:
    p = (LABELS + np.random.default_rng(seed).integers(0, 2, len(LABELS))) % 4  # some right, some wrong
    if flip is not None:
        p[flip] = (p[flip] + 1) % 4
    return p


def with_predictions(task: str, attention: str, seed: int, p: np.ndarray) -> dict:
    rec = record(task, attention, seed, acc=float(np.mean(p == LABELS)))
    return {**rec, "test_predictions": encode(p, LABELS, "fingerprint-of-the-test-set")}


def test_only_variants_with_the_same_predictions_on_every_seed_are_one_result(tmp_path):
    runs = tmp_path / "runs"
    for seed in (0, 1):
        for att in ("flash", "bigbird", "longformer"):  # the same function at this length
            write(runs, with_predictions("listops", att, seed, predicted(seed)))
        write(runs, with_predictions("listops", "softmax", seed, predicted(seed, flip=3)))  # one example differs
        write(runs, with_predictions("listops", "local", seed, predicted(seed, flip=5 if seed else None)))  # seed 1
        for att in ("linear", "performer"):  # both collapsed to one class: agreeing for another reason
            write(runs, with_predictions("listops", att, seed, np.zeros_like(LABELS)))
        write(runs, with_predictions("text", "flash", seed, predicted(seed)))  # another task: its own groups
        write(runs, with_predictions("text", "softmax", seed, predicted(seed, flip=0)))
    df = load_runs(runs)
    assert identical_groups(df, "cpu") == {"listops": [["longformer", "bigbird", "flash"]]}
    note = identical_note(df, "cpu")
    assert "**The same predictions, example by example, on every seed**" in note
    assert note.rstrip().endswith("ListOps: longformer, bigbird, flash.") and "Text" not in note
    assert identical_note(df[~df.attention.isin(["bigbird", "longformer"])], "cpu") == ""
