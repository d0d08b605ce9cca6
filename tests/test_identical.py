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


def with_predictions(task: str, attention: str, seed: int, p: np.ndarray, profile: str = "cpu",
                     fingerprint: str = "the-test-set") -> dict:
    rec = record(task, attention, seed, acc=float(np.mean(p == LABELS)), profile=profile)
    return {**rec, "test_predictions": encode(p, LABELS, fingerprint)}


def same_accuracy_other_predictions(seed: int) -> np.ndarray:
    p = predicted(seed)
    right, wrong = np.flatnonzero(p == LABELS)[0], np.flatnonzero(p != LABELS)[0]
    p[right], p[wrong] = (p[right] + 1) % 4, LABELS[wrong]  # one right made wrong, one wrong made right
    return p


def test_only_variants_with_the_same_predictions_on_every_seed_are_one_result(tmp_path):
    runs = tmp_path / "runs"
    for seed in (0, 1):
        for att in ("flash", "bigbird", "longformer"):  # the same function at this length
            write(runs, with_predictions("listops", att, seed, predicted(seed)))
        write(runs, with_predictions("listops", "softmax", seed, predicted(seed, flip=3)))  # one example differs
        write(runs, with_predictions("listops", "local", seed, predicted(seed, flip=5 if seed else None)))  # seed 1
        write(runs, with_predictions("listops", "sinkhorn", seed, same_accuracy_other_predictions(seed)))
        write(runs, with_predictions("listops", "reformer", 1 - seed, predicted(seed)))  # seeds swapped
        write(runs, with_predictions("listops", "routing", seed, predicted(seed), fingerprint="another-test-set"))
        for att in ("linear", "performer"):  # both collapsed to one class: agreeing for another reason
            write(runs, with_predictions("listops", att, seed, np.zeros_like(LABELS)))
        write(runs, with_predictions("text", "flash", seed, predicted(seed)))  # another task: its own groups
        write(runs, with_predictions("text", "softmax", seed, predicted(seed, flip=0)))
        for att in ("synthesizer", "fnet"):  # another profile: its own groups, named with it
            write(runs, with_predictions("listops", att, seed, predicted(seed + 7), profile="quick"))
    write(runs, with_predictions("listops", "flash", 0, predicted(9), profile="quick"))  # flash of quick: one seed
    df = load_runs(runs)
    cpu = df[(df.profile == "cpu") & (df.task == "listops")]
    accs = {a: sorted(cpu.loc[cpu.attention == a, "test_acc"]) for a in ("sinkhorn", "flash")}
    assert accs["sinkhorn"] == accs["flash"]  # the same accuracies, other predictions: not one result
    assert identical_groups(df, "cpu") == {("cpu", "listops"): [["longformer", "bigbird", "flash"]]}
    assert identical_groups(df, None) == {("cpu", "listops"): [["longformer", "bigbird", "flash"]],
                                          ("quick", "listops"): [["synthesizer", "fnet"]]}
    note = identical_note(df, "cpu")
    assert note.startswith("**The same predictions, example by example, on every seed** (one result under several "
                           "names, not independent ones; at the runs' lengths BigBird's blocks")
    assert note.rstrip().endswith("ListOps (`cpu`): longformer, bigbird, flash.") and "Text" not in note
    other = identical_note(df, None, chart=True)  # synthesizer and fnet: no known reason, said so
    assert "their bubbles' heights are one accuracy" in other and "check their configs" in other
    assert "ListOps (`quick`): synthesizer, fnet" in other
    assert identical_note(df[~df.attention.isin(["bigbird", "longformer", "synthesizer"])], None) == ""
