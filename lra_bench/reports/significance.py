"""Which accuracy differences the data supports: each variant against a reference (``--reference``, default
softmax) per task and on the LRA average, and per task the 95 % confidence set for the best.

A cell's sample is its ok seeds' test accuracies and, when every one of those records kept its per-example test
predictions on one test set (``lra_bench.store.predictions``), their correctness matrix (seeds x examples). Two
cells are compared by

* ``paired``: the paired test over seeds and examples (:func:`lra_bench.stats.paired.paired_difference`) when both
  have predictions on the same test set (same fingerprint);
* ``welch``: Welch's t over the seeds' accuracies alone when either lacks them (older records) and both were scored
  on the same test set (or either's is unknown). It is conditional on the test set (test-example sampling is left
  out), so it is not more conservative than the paired test;
* nothing (``untested``) when either cell has a single seed (the seed-to-seed spread is then unknown), or when the
  two were scored on different test sets (their accuracies measure different things), whether or not they kept
  predictions.

Against the reference, four marks (:func:`family`): better or worse when the two-sided test rejects; equivalent when
the two one-sided tests show the difference within +-margin (default 2 points, ``--margin``); not resolved when
neither is shown. Within one family (all variants against one reference, on one task or on the average) both the
difference p-values and the equivalence p-values are Holm-corrected, each family on its own, so the chance of a
false better-or-worse mark stays at or below 5 %, and so does the chance of a false equivalent mark (of either kind:
up to about 10 %). Each verdict also carries the one-sided 95 % lower bound of the difference, which is what a
bar "at least the reference minus m" is judged by. The average's difference is the mean of the task differences
over the tasks both have; its variance the sum of theirs / T^2.

The best (:func:`best_of`): the selection-aware 95 % confidence set of :func:`lra_bench.stats.best.best_set` from
every pair's test, and each variant's P(rank 1).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from lra_bench.stats.best import best_set, covariance, pooled_covariance, rank_one_probability
from lra_bench.stats.intervals import welch_df
from lra_bench.stats.paired import (
    ALPHA,
    holm_adjusted,
    lower_bound,
    p_value,
    paired_difference,
    tost,
    welch_seeds,
)
from lra_bench.store import predictions

BETTER, WORSE, EQUIVALENT, UNRESOLVED, UNTESTED, REFERENCE = ("better", "worse", "equivalent", "not resolved",
                                                               "untested", "reference")
SAME = "same predictions"  # the reference's own predictions on every example and seed: one result, no test made
MARKS = {BETTER: "▲", WORSE: "▼", EQUIVALENT: "≈", UNRESOLVED: "?", UNTESTED: "", REFERENCE: "ref", SAME: "≡"}
BEST_MARK = "★"
MARGIN = 2.0  # points: the default equivalence margin (--margin)
NO_PREDICTIONS = "record(s) without per-example predictions"  # the end of Sample.why_unpaired for older records


@dataclass
class Sample:
    """One cell: accuracies (%) of its ok seeds, the test set they were scored on (``test_set``: None when unknown,
    ``MIXED`` when its seeds differ), and their correctness (seeds x examples) when all kept predictions on one
    fingerprinted test set (``why_unpaired`` says why not), with then a digest of each seed's predicted classes
    (``predicted``: two cells with the same digests on the same seeds are one result,
    :mod:`lra_bench.reports.same_predictions`)."""

    accs: np.ndarray
    correct: np.ndarray | None = None
    fingerprint: str | None = None
    why_unpaired: str = ""
    test_set: str | None = None
    predicted: tuple[str, ...] | None = None


MIXED = "mixed"  # Sample.test_set of a cell whose seeds were scored on different test sets: compared with nothing


def sample(accs_pct, prediction_fields, test_sets=None) -> Sample:
    """A :class:`Sample` from the ok seeds' accuracies (%), their records' ``test_predictions`` (None where absent)
    and, when known, the fingerprint of the test set each was scored on (``table1.test_fingerprint_of``; empty or
    None where unknown)."""
    accs = np.asarray(accs_pct, float)
    fields = list(prediction_fields)
    known = {str(t) for t in (test_sets or []) if t}
    test_set = MIXED if len(known) > 1 else (known.pop() if known else None)
    if not fields or any(not isinstance(f, dict) for f in fields):
        missing = sum(not isinstance(f, dict) for f in fields)
        return Sample(accs, why_unpaired=f"{missing} of {len(fields)} {NO_PREDICTIONS}", test_set=test_set)
    prints = {f.get("test_fingerprint") for f in fields}
    if None in prints or "" in prints:
        return Sample(accs, why_unpaired="predictions without a test fingerprint", test_set=test_set)
    if len(prints) != 1:
        return Sample(accs, why_unpaired="seeds evaluated on different test sets", test_set=MIXED)
    try:
        decoded = [predictions.decode(f) for f in fields]
    except ValueError as e:
        return Sample(accs, why_unpaired=str(e), test_set=test_set)
    correct = np.stack([c for _, c in decoded])
    if correct.shape[0] != len(accs) or not np.allclose(correct.mean(1) * 100, accs, rtol=0, atol=1e-9):
        return Sample(accs, why_unpaired="per-example predictions disagree with test_acc", test_set=test_set)
    fingerprint = prints.pop()
    digests = tuple(hashlib.blake2b(np.ascontiguousarray(p, np.int64).tobytes(), digest_size=16).hexdigest()
                    for p, _ in decoded)
    return Sample(accs, correct, fingerprint, test_set=test_set or fingerprint, predicted=digests)


def compare(a: Sample, b: Sample) -> tuple[float, float, float, str] | None:
    """(a - b in points, standard error, degrees of freedom, method) or None when untestable (a single seed, or
    predictions on different test sets)."""
    if len(a.accs) < 2 or len(b.accs) < 2 or MIXED in (a.test_set, b.test_set):
        return None
    if a.correct is not None and b.correct is not None:
        if a.fingerprint != b.fingerprint:
            return None  # different test sets: neither a paired test nor a comparison of their accuracies
        d, se, df = paired_difference(a.correct, b.correct)
        return float(d) * 100, float(se) * 100, float(df), "paired"
    if a.test_set is not None and b.test_set is not None and a.test_set != b.test_set:
        return None  # different test sets: their accuracies measure different things
    d, se, df = welch_seeds(a.accs, b.accs)
    return d, se, df, "welch"


def combine(parts: list[tuple[float, float, float, str]]) -> tuple[float, float, float, str]:
    """The difference of averages over T tasks from the T task differences (independent test sets)."""
    k = len(parts)
    variances = [(se / k) ** 2 for _, se, _, _ in parts]
    methods = {m for *_, m in parts}
    return (float(np.mean([d for d, *_ in parts])), math.sqrt(sum(variances)),
            welch_df(variances, [df for _, _, df, _ in parts]), methods.pop() if len(methods) == 1 else "mixed")


def family(reference: str, results: dict[str, tuple[float, float, float, str] | None],
           margin: float = MARGIN) -> dict[str, dict]:
    """Holm-corrected verdicts for ``results`` (variant -> compare() against ``reference``, or None): better / worse
    when the two-sided test rejects, else equivalent when the TOST within +-``margin`` points rejects, else not
    resolved; with the difference d, its p (raw and Holm), the TOST's Holm p and the one-sided 95 % lower bound."""
    names = [n for n in results if n != reference]
    tested = [results[n] for n in names]
    p = np.array([float(p_value(*r[:3])) if r else np.nan for r in tested])
    p_eq = np.array([float(tost(*r[:3], margin)) if r else np.nan for r in tested])
    adjusted, adjusted_eq = holm_adjusted(p), holm_adjusted(p_eq)
    nan = math.nan
    out = {reference: {"verdict": REFERENCE, "d": 0.0, "p": nan, "p_holm": nan, "p_equiv_holm": nan, "lower": nan,
                       "method": ""}}
    for name, r, raw, adj, adj_eq in zip(names, tested, p, adjusted, adjusted_eq, strict=True):
        if r is None:
            out[name] = {"verdict": UNTESTED, "d": nan, "p": nan, "p_holm": nan, "p_equiv_holm": nan, "lower": nan,
                         "method": ""}
            continue
        if adj <= ALPHA:
            verdict = BETTER if r[0] > 0 else WORSE
        else:
            verdict = EQUIVALENT if adj_eq <= ALPHA else UNRESOLVED
        out[name] = {"verdict": verdict, "d": r[0], "p": float(raw), "p_holm": float(adj),
                     "p_equiv_holm": float(adj_eq), "lower": float(lower_bound(*r[:3])), "method": r[3]}
    return out


def against(reference: str, samples: dict[str, Sample], margin: float = MARGIN) -> dict[str, dict]:
    """One task: every variant of ``samples`` against ``reference`` (which must be among them)."""
    ref = samples[reference]
    return family(reference, {n: compare(s, ref) for n, s in samples.items() if n != reference}, margin)


def average_difference(a: str, b: str, per_task: dict[str, dict[str, Sample]]) -> tuple | None:
    """compare() of the averages of ``a`` and ``b`` over the tasks of ``per_task``, or None when either lacks one
    of them or a task's pair is untestable."""
    if not all(a in s and b in s for s in per_task.values()) or not per_task:
        return None
    parts = [compare(s[a], s[b]) for s in per_task.values()]
    return combine(parts) if all(parts) else None


def against_average(reference: str, per_task: dict[str, dict[str, Sample]], margin: float = MARGIN) -> dict[str, dict]:
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
    return family(reference, results, margin)


def best_of(names: list[str], means, variances, pair) -> dict | None:
    """The 95 % confidence set for the best among ``names`` (means and variances of their estimates, in points and
    points^2) from ``pair(a, b)`` (compare() of a against b, or None when untestable):
    {"set", "p_rank1" (name -> share of draws where it is highest)}; None with fewer than 2 names or when no pair
    could be tested."""
    v = len(names)
    if v < 2:
        return None
    d, se, df = (np.full((v, v), np.nan) for _ in range(3))
    for i, a in enumerate(names):
        for j in range(i + 1, v):
            r = pair(a, names[j])
            if r is not None:
                d[i, j], se[i, j], df[i, j] = r[:3]
                d[j, i], se[j, i], df[j, i] = -r[0], r[1], r[2]
    if np.isnan(se).all():
        return None
    np.fill_diagonal(d, 0.0)
    members = best_set(d, se, df)
    p1 = rank_one_probability(np.asarray(means, float), pooled_covariance(covariance(variances, se)))
    return {"set": {n for n, m in zip(names, members, strict=True) if m},
            "p_rank1": dict(zip(names, map(float, p1), strict=True))}


def with_repeats(verdicts: dict[str, dict], representative: dict[str, str], reference: str) -> dict[str, dict]:
    """A family's verdicts (:func:`family`, made over distinct results) with the other names of each result added
    (``representative``: name -> the name it was tested under, :func:`lra_bench.reports.same_predictions
    .representatives`): each gets its result's verdict and ``same_as``; those of the reference's own result get
    :data:`SAME`."""
    out = dict(verdicts)
    nan = math.nan
    for name, rep in representative.items():
        if name == rep:
            continue
        if rep == reference:
            out[name] = {"verdict": SAME, "d": 0.0, "p": nan, "p_holm": nan, "p_equiv_holm": nan, "lower": nan,
                         "method": "", "same_as": rep}
        elif rep in out:
            out[name] = dict(out[rep], same_as=rep)
    return out


def best_with_repeats(best: dict | None, representative: dict[str, str]) -> dict | None:
    """:func:`best_of`'s result (made over distinct results) with the other names of each result added: in the set
    when their result is, with its P(rank 1); ``same_as`` (name -> the name counted) lists them."""
    if best is None:
        return None
    others = {n: r for n, r in representative.items() if n != r and r in best["p_rank1"]}
    return {"set": best["set"] | {n for n, r in others.items() if r in best["set"]},
            "p_rank1": best["p_rank1"] | {n: best["p_rank1"][r] for n, r in others.items()}, "same_as": others}
