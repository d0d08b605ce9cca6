"""Which accuracy differences the data supports: each variant against a reference (``--reference``, default
softmax) per task and on the LRA average, and per task the variants statistically tied with the best.

A cell's sample is its ok seeds' test accuracies and, when every one of those records kept its per-example test
predictions on one test set (``lra_bench.store.predictions``), their correctness matrix (seeds x examples). Two
cells are compared by

* ``paired``: the paired test over seeds and examples (:func:`lra_bench.stats.paired.paired_difference`) when both
  have predictions on the same test set (same fingerprint);
* ``welch``: Welch's t over the seeds' accuracies alone when either lacks them (older records). It is conditional
  on the test set (test-example sampling is left out), so it is not more conservative than the paired test;
* nothing (``untested``) when either cell has a single seed (the seed-to-seed spread is then unknown), or when both
  kept predictions but on different test sets (their accuracies measure different things).

Within one family (all variants against one reference, on one task or on the average) p-values are
Holm-corrected, so the chance of marking any variant different when none is stays at or below 5 %. The average's
difference is the mean of the task differences over the tasks both have; its variance the sum of theirs / T^2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lra_bench.stats.intervals import welch_df
from lra_bench.stats.paired import ALPHA, holm_adjusted, p_value, paired_difference, welch_seeds
from lra_bench.store import predictions

BETTER, WORSE, TIED, UNTESTED, REFERENCE = "better", "worse", "not significant", "untested", "reference"
MARKS = {BETTER: "▲", WORSE: "▼", TIED: "≈", UNTESTED: "", REFERENCE: "ref"}
BEST_MARK = "★"
NO_PREDICTIONS = "record(s) without per-example predictions"  # the end of Sample.why_unpaired for older records


@dataclass
class Sample:
    """One cell: accuracies (%) of its ok seeds, and their correctness (seeds x examples) when all kept predictions
    on one test set (``why_unpaired`` says why not)."""

    accs: np.ndarray
    correct: np.ndarray | None = None
    fingerprint: str | None = None
    why_unpaired: str = ""


def sample(accs_pct, prediction_fields) -> Sample:
    """A :class:`Sample` from the ok seeds' accuracies (%) and their records' ``test_predictions`` (None where
    absent)."""
    accs = np.asarray(accs_pct, float)
    fields = list(prediction_fields)
    if not fields or any(not isinstance(f, dict) for f in fields):
        missing = sum(not isinstance(f, dict) for f in fields)
        return Sample(accs, why_unpaired=f"{missing} of {len(fields)} {NO_PREDICTIONS}")
    prints = {f.get("test_fingerprint") for f in fields}
    if len(prints) != 1:
        return Sample(accs, why_unpaired="seeds evaluated on different test sets")
    try:
        correct = np.stack([predictions.decode(f)[1] for f in fields])
    except ValueError as e:
        return Sample(accs, why_unpaired=str(e))
    if correct.shape[0] != len(accs) or not np.allclose(correct.mean(1) * 100, accs, rtol=0, atol=1e-9):
        return Sample(accs, why_unpaired="per-example predictions disagree with test_acc")
    return Sample(accs, correct, prints.pop())


def compare(a: Sample, b: Sample) -> tuple[float, float, float, str] | None:
    """(a - b in points, standard error, degrees of freedom, method) or None when untestable (a single seed, or
    predictions on different test sets)."""
    if len(a.accs) < 2 or len(b.accs) < 2:
        return None
    if a.correct is not None and b.correct is not None:
        if a.fingerprint != b.fingerprint:
            return None  # different test sets: neither a paired test nor a comparison of their accuracies
        d, se, df = paired_difference(a.correct, b.correct)
        return float(d) * 100, float(se) * 100, float(df), "paired"
    d, se, df = welch_seeds(a.accs, b.accs)
    return d, se, df, "welch"


def combine(parts: list[tuple[float, float, float, str]]) -> tuple[float, float, float, str]:
    """The difference of averages over T tasks from the T task differences (independent test sets)."""
    k = len(parts)
    variances = [(se / k) ** 2 for _, se, _, _ in parts]
    methods = {m for *_, m in parts}
    return (float(np.mean([d for d, *_ in parts])), math.sqrt(sum(variances)),
            welch_df(variances, [df for _, _, df, _ in parts]), methods.pop() if len(methods) == 1 else "mixed")


def family(reference: str, results: dict[str, tuple[float, float, float, str] | None]) -> dict[str, dict]:
    """Holm-corrected verdicts for ``results`` (variant -> compare() against ``reference``, or None)."""
    names = [n for n in results if n != reference]
    p = np.array([float(p_value(*results[n][:3])) if results[n] else np.nan for n in names])
    adjusted = holm_adjusted(p)
    out = {reference: {"verdict": REFERENCE, "d": 0.0, "p": math.nan, "p_holm": math.nan, "method": ""}}
    for name, raw, adj in zip(names, p, adjusted, strict=True):
        r = results[name]
        if r is None:
            out[name] = {"verdict": UNTESTED, "d": math.nan, "p": math.nan, "p_holm": math.nan, "method": ""}
            continue
        verdict = TIED if not adj <= ALPHA else (BETTER if r[0] > 0 else WORSE)
        out[name] = {"verdict": verdict, "d": r[0], "p": float(raw), "p_holm": float(adj), "method": r[3]}
    return out


def against(reference: str, samples: dict[str, Sample]) -> dict[str, dict]:
    """One task: every variant of ``samples`` against ``reference`` (which must be among them)."""
    ref = samples[reference]
    return family(reference, {n: compare(s, ref) for n, s in samples.items() if n != reference})


def against_average(reference: str, per_task: dict[str, dict[str, Sample]]) -> dict[str, dict]:
    """The LRA average: untested unless the variant has exactly the reference's tasks (so the difference tested is
    the difference of the averages shown) and every one of them is tested."""
    names = sorted({n for samples in per_task.values() for n in samples})
    tasks = [t for t, s in per_task.items() if reference in s]
    results: dict[str, tuple | None] = {}
    for name in names:
        if name == reference:
            continue
        if [t for t, s in per_task.items() if name in s] != tasks:
            results[name] = None
            continue
        parts = [compare(per_task[t][name], per_task[t][reference]) for t in tasks]
        results[name] = combine(parts) if parts and all(parts) else None
    return family(reference, results)


def best(means: dict[str, float]) -> str | None:
    finite = {n: m for n, m in means.items() if math.isfinite(m)}
    return max(sorted(finite), key=finite.get) if finite else None


def tied_with_best(verdicts_vs_best: dict[str, dict]) -> set[str] | None:
    """The best and every variant not significantly different from it; None when none could be tested."""
    tested = [n for n, v in verdicts_vs_best.items() if v["verdict"] not in (UNTESTED, REFERENCE)]
    if not tested:
        return None
    return {n for n, v in verdicts_vs_best.items() if v["verdict"] in (TIED, REFERENCE)}
