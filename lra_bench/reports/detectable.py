"""The detectable gap of each task: the smallest true difference from the reference that the table's own design
(its seeds per variant, its test examples, its number of variants tested, Holm at 5 %) finds with 80 % power
(:func:`lra_bench.stats.power.detectable_gap`), from the variance components of the records themselves (seed,
paired per-example and seed x example, pooled over the variants' pairs with the reference, each pair on one test
set with per-example predictions). A difference below it is missed more often than found, so an unmarked
difference, a "?" or a place in the confidence set for the best says "cannot be told apart at this power", never
"equal"."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from lra_bench.reports.significance import Sample
from lra_bench.reports.tasks import TASK_LABELS
from lra_bench.stats.paired import ALPHA
from lra_bench.stats.power import POWER, Noise, detectable_gap, pair_components, pooled


@dataclass(frozen=True)
class Detectable:
    """One task's design and what it detects: ``gap`` in points (inf when no gap that fits is found that often)."""

    task: str
    seeds: int
    examples: int
    comparisons: int
    gap: float
    noise: Noise


def task_noise(samples: dict[str, Sample], reference: str) -> tuple[Noise, int, int, int] | None:
    """(noise, seeds, examples, comparisons) of one task's cells: the components pooled over the pairs of each
    variant with ``reference`` (both with per-example predictions on one test set and >= 2 seeds); the design's
    seeds are the commonest seed count of those variants. None when no such pair exists."""
    ref = samples.get(reference)
    if ref is None or ref.correct is None or len(ref.correct) < 2:
        return None
    pairs = {n: s for n, s in samples.items() if n != reference and s.correct is not None and len(s.correct) >= 2
             and s.fingerprint == ref.fingerprint}
    if not pairs:
        return None
    components = pooled([pair_components(s.correct, ref.correct) for s in pairs.values()])
    acc = float(np.mean([s.correct.mean() for s in (*pairs.values(), ref)]))
    seeds = Counter(len(s.correct) for s in (*pairs.values(), ref)).most_common(1)[0][0]
    tested = sum(1 for n, s in samples.items() if n != reference and len(s.accs) >= 2)
    return Noise.fit(acc, components), seeds, ref.correct.shape[1], max(tested, 1)


def detectable(samples: dict[str, Sample], task: str, reference: str, alpha: float = ALPHA) -> Detectable | None:
    """The detectable gap of one task's cells against ``reference`` (None when :func:`task_noise` is None)."""
    found = task_noise(samples, reference)
    if found is None:
        return None
    noise, seeds, examples, comparisons = found
    return Detectable(task, seeds, examples, comparisons, 100 * detectable_gap(noise, seeds, examples, comparisons,
                                                                               alpha), noise)


def gap_text(gap: float) -> str:
    return f"{gap:.1f}" if math.isfinite(gap) else "none within [0, 100]"


def detectable_note(found: dict[str, Detectable], reference: str, at_chance: set[str]) -> str:
    """Markdown under Table 1: each task's detectable gap and the design behind it ('' when none)."""
    if not found:
        return ""
    parts = []
    for task, d in found.items():
        chance = ", at chance" if task in at_chance else ""
        parts.append(f"{TASK_LABELS.get(task, task)} {gap_text(d.gap)} points ({d.seeds} seeds x {d.examples:,} test "
                     f"examples, {d.comparisons} variant(s) tested{chance})")
    return (f"**Detectable gap** ({POWER * 100:.0f} % power, the paired test against `{reference}` at 5 % / the "
            "number of variants tested, Holm's first step; from this table's own seed, per-example and seed x "
            "example variance, for two variants straddling the task's mean accuracy): " + "; ".join(parts)
            + ". A true difference smaller than this is missed more often than found: no mark, ? or ★ means "
            "\"cannot be told apart at this power\", never \"equal\". `python scripts/plan.py --power GAP` gives the "
            "seeds and test examples a smaller gap needs, and their cost.\n")


def caption_line(found: dict[str, Detectable], reference: str, tasks) -> str:
    """One line for a chart caption: the detectable gap of ``tasks`` ('' when none is known)."""
    known = [f"{TASK_LABELS.get(t, t)} {gap_text(found[t].gap)}" for t in tasks if t in found]
    if not known:
        return ""
    return (f"Detectable gap vs {reference} ({POWER * 100:.0f} % power, paired test, Holm): " + ", ".join(known)
            + " points; smaller true differences are missed more often than found.")
