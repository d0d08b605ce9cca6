"""Table 1's verdicts for one profile: per task and for the LRA average, every variant against the reference (four
marks, :func:`lra_bench.reports.significance.family`), the 95 % confidence set for the best with P(rank 1)
(:func:`lra_bench.reports.significance.best_of`), the detectable gap (:mod:`lra_bench.reports.detectable`), which
tasks are at chance (:mod:`lra_bench.reports.chance`), and the notes under the table that say all of it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lra_bench.reports import significance as sig
from lra_bench.reports.chance import AT_MAJORITY, ONE_CLASS
from lra_bench.reports.detectable import detectable, detectable_note
from lra_bench.reports.tasks import TASK_LABELS, TASKS, TASKS5

AVG = "avg"
SHOWN_IN_FULL = 8  # a confidence set for the best up to this size is listed in full under the table


def ranked_tasks(cells: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(the tasks of the 5 that enter the LRA average, those left out because every variant is at chance)."""
    ran = cells[cells.n > 0]
    present = [t for t in TASKS5 if t in set(ran.task)]
    chance = [t for t in present if ran[ran.task == t].at_chance.all()]
    return [t for t in present if t not in chance], chance


def verdicts_of(cells: pd.DataFrame, reference: str, margin: float = sig.MARGIN) -> dict[str, dict]:
    """For one profile's cells (:func:`lra_bench.reports.table1.task_cells`), per task and for the average (key
    ``"avg"``): ``vs_ref`` (verdicts against ``reference``, empty without its cell), ``best`` (the confidence set
    for the best and P(rank 1), None when untested), and per task ``detectable`` and ``at_chance``; the average
    also ``tasks`` (those it covers) and ``left_out`` (tasks at chance)."""
    ran = cells[cells.n > 0]
    per_task = {task: dict(zip(g.attention, g["sample"], strict=True)) for task, g in ran.groupby("task")}
    ranked, chance = ranked_tasks(cells)
    out: dict[str, dict] = {}
    for task, samples in per_task.items():
        g = ran[ran.task == task].set_index("attention")
        testable = [a for a, s in samples.items() if len(s.accs) >= 2]
        out[task] = {
            "vs_ref": sig.against(reference, samples, margin) if reference in samples else {},
            "best": sig.best_of(testable, [g.loc[a, "mean"] for a in testable], [g.loc[a, "se"] ** 2 for a in testable],
                                lambda a, b, s=samples: sig.compare(s[a], s[b])),
            "detectable": detectable(samples, task, reference), "at_chance": task in chance}
    five = {t: per_task[t] for t in ranked}
    counts: dict[str, int] = {}
    for samples in five.values():
        for a, s in samples.items():
            counts[a] = counts.get(a, 0) + (len(s.accs) >= 2)
    full = sorted(a for a, k in counts.items() if k == len(five) and five)
    cell = {(r.task, r.attention): r for r in ran.itertuples()}
    variances = [sum(cell[t, a].se ** 2 for t in five) / len(five) ** 2 for a in full]
    means = [float(np.mean([cell[t, a].mean for t in five])) for a in full]
    has_ref = any(reference in s for s in five.values())
    out[AVG] = {"vs_ref": sig.against_average(reference, five, margin) if has_ref else {},
                "best": sig.best_of(full, means, variances, lambda a, b: sig.average_difference(a, b, five)),
                "tasks": ranked, "left_out": chance}
    return out


def _best_text(label: str, best: dict) -> str:
    members = sorted(best["set"], key=lambda a: (-best["p_rank1"][a], a))
    total = len(best["p_rank1"])
    if len(members) <= SHOWN_IN_FULL:
        listed = ", ".join(f"{a} {best['p_rank1'][a]:.2f}" for a in members)
        return f"{label} ({len(members)} of {total}): {listed}"
    top = ", ".join(f"{a} {best['p_rank1'][a]:.2f}" for a in members[:3])
    return f"{label} ({len(members)} of {total}: cannot be told apart at this power; highest P(rank 1): {top})"


def verdicts_note(cells: pd.DataFrame, verdicts: dict[str, dict], reference: str, margin: float) -> str:
    """Markdown under Table 1: what each mark means, the tests made, the collapsed runs and the tasks at chance, the
    detectable gaps, the confidence sets for the best, and which cells cannot enter a paired comparison."""
    ok = cells[cells.n > 0]
    m = sig.MARKS
    lines = [f"Against `{reference}` (Holm-corrected across variants, 5 %): {m[sig.BETTER]} better, {m[sig.WORSE]} "
             f"worse; {m[sig.EQUIVALENT]} equivalent, the two one-sided tests showing the difference within "
             f"±{margin:g} points (`--margin`; Holm-corrected too); {m[sig.UNRESOLVED]} neither shown. "
             f"{sig.BEST_MARK} in the 95 % confidence set for the best of the column: no other variant is shown better "
             "than it (one-sided paired tests at 5 % / (variants - 1), Hsu's multiple comparisons with the best), so "
             "the set holds the true best with probability at least 95 %; a star says the variant cannot be told "
             "apart from the best at this power, not that it equals it. Cells with one seed enter neither. "]
    methods = [v["method"] for k, t in verdicts.items() if k != AVG for v in t["vs_ref"].values() if v["method"]]
    if methods:
        counts = pd.Series(methods).value_counts()
        lines.append("Tests made against the reference: " + ", ".join(f"{k} {mm}" for mm, k in counts.items())
                     + " (paired = over seeds and test examples; welch = over seeds only, where per-example "
                     "predictions are missing: it leaves out test-example sampling, so it only says whether the "
                     "variants differ on this test set; mixed = an average over tasks of both). ")
    elif reference not in set(ok.attention):
        lines.append(f"No `{reference}` cell in this profile, so nothing is marked against it (--reference). ")
    single = ok[ok.n < 2]
    if len(single):
        lines.append(f"{len(single)} of {len(ok)} cells have a single seed: their interval is the test sample's "
                     "alone (Wilson) and they enter no test -- a test needs 2 or more seeds on both sides, since "
                     "the seed-to-seed spread is otherwise unknown. ")
    lines.append(_unpaired(ok, reference))
    lines.append(_chance(ok, verdicts[AVG]))
    found = {t: verdicts[t]["detectable"] for t in TASKS if t in verdicts and verdicts[t]["detectable"]}
    gaps = detectable_note(found, reference, {t for t in verdicts if t != AVG and verdicts[t]["at_chance"]})
    if gaps:
        lines.append("\n\n" + gaps.rstrip())
    sets = [_best_text(TASK_LABELS.get(t, t), verdicts[t]["best"]) for t in TASKS
            if t in verdicts and verdicts[t]["best"]]
    if verdicts[AVG]["best"]:
        sets.append(_best_text("LRA avg", verdicts[AVG]["best"]))
    if sets:
        lines.append("\n\n95 % confidence set for the best (★), with each member's P(rank 1), its posterior "
                     "probability of being the best (empirical Bayes with the column's pooled noise: the means shrunk "
                     "toward their average by how much of their spread is noise): "
                     + "; ".join(sets) + ".")
    return "".join(lines).rstrip() + "\n"


def _unpaired(ok: pd.DataFrame, reference: str) -> str:
    lines = []
    unpaired = [r for r in ok.itertuples() if r.sample.correct is None]
    missing = [f"{r.attention}/{r.task}" for r in unpaired if r.sample.why_unpaired.endswith(sig.NO_PREDICTIONS)]
    other = [f"{r.attention}/{r.task} ({r.sample.why_unpaired})" for r in unpaired
             if not r.sample.why_unpaired.endswith(sig.NO_PREDICTIONS)]
    if missing and len(missing) == len(ok):
        lines.append(f"None of the {len(ok)} cells' records kept per-example test predictions (older records), so "
                     "no paired comparison is possible here; cells with 2 or more seeds are compared over seeds only, "
                     "and their intervals bound test sampling by the binomial p (1 - p) / N. ")
    elif missing:
        shown = ", ".join(missing[:12]) + (f" and {len(missing) - 12} more" if len(missing) > 12 else "")
        lines.append(f"No paired comparison is possible for {len(missing)} cell(s) whose records lack per-example "
                     f"test predictions (older records): {shown}. ")
    if other:
        lines.append(f"No paired comparison is possible for {len(other)} more cell(s): {', '.join(other)}. ")
    ref_print = {r.task: r.sample.fingerprint for r in ok.itertuples()
                 if r.attention == reference and r.sample.correct is not None}
    elsewhere = [f"{r.attention}/{r.task}" for r in ok.itertuples() if r.sample.correct is not None
                 and r.task in ref_print and r.sample.fingerprint != ref_print[r.task]]
    if elsewhere:
        lines.append(f"Not compared with `{reference}`, whose predictions are on a different test set: "
                     f"{', '.join(elsewhere)}. ")
    return "".join(lines)


def _chance(ok: pd.DataFrame, average: dict) -> str:
    lines = []
    counts = []
    for task in TASKS:
        g = ok[ok.task == task]
        if len(g) and g.collapsed.sum():
            counts.append(f"{TASK_LABELS[task]} {int(g.collapsed.sum())} of {int(g.n.sum())}")
    if counts:
        lines.append(f"Collapsed runs ({ONE_CLASS}, or test accuracy {AT_MAJORITY}: indistinguishable from always "
                     "guessing the commonest class), counted in their cells as \"k collapsed\": "
                     + ", ".join(counts) + ". ")
    if average["left_out"]:
        names = ", ".join(TASK_LABELS[t] for t in average["left_out"])
        lines.append(f"At chance for every variant (each cell's runs all collapsed or its interval holding the "
                     f"majority rate), so shown but left out of the LRA average, its marks and its best set: {names}. ")
    if average["tasks"]:
        lines.append("The LRA average covers " + ", ".join(TASK_LABELS[t] for t in average["tasks"]) + ". ")
    return "".join(lines)
