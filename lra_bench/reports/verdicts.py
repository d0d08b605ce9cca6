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
from lra_bench.reports.same_predictions import groups, representatives
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
    for the best and P(rank 1), None when untested), ``same`` (the groups of variants that are one result:
    :mod:`lra_bench.reports.same_predictions`), and per task ``detectable`` and ``at_chance``; the average also
    ``tasks`` (those it covers) and ``left_out`` (tasks at chance). One result under several names is tested,
    ranked and counted once (Holm's family, Hsu's comparisons, P(rank 1), the detectable gap's comparisons), and
    every name shows its result's verdict; names of the reference's own result are marked ``sig.SAME``."""
    ran = cells[cells.n > 0]
    per_task = {task: dict(zip(g.attention, g["sample"], strict=True)) for task, g in ran.groupby("task")}
    same = {task: found for (_, task), found in groups(ran).items()}  # one profile
    ranked, chance = ranked_tasks(cells)
    out: dict[str, dict] = {}
    reps = {task: representatives(same.get(task, []), reference) for task in per_task}  # name -> counted under
    for task, samples in per_task.items():
        g = ran[ran.task == task].set_index("attention")
        rep = reps[task]
        distinct = {a: s for a, s in samples.items() if rep.get(a, a) == a}
        testable = [a for a, s in distinct.items() if len(s.accs) >= 2]
        vs_ref = sig.against(reference, distinct, margin) if reference in samples else {}
        best = sig.best_of(testable, [g.loc[a, "mean"] for a in testable], [g.loc[a, "se"] ** 2 for a in testable],
                           lambda a, b, s=samples: sig.compare(s[a], s[b]))
        out[task] = {"vs_ref": sig.with_repeats(vs_ref, rep, reference) if vs_ref else {},
                     "best": sig.best_with_repeats(best, rep), "same": same.get(task, []),
                     "detectable": detectable(distinct, task, reference), "at_chance": task in chance}
    five = {t: per_task[t] for t in ranked}
    counts: dict[str, int] = {}
    for samples in five.values():
        for a, s in samples.items():
            counts[a] = counts.get(a, 0) + (len(s.accs) >= 2)
    full = sorted(a for a, k in counts.items() if k == len(five) and five)
    # on the average, one result = one result on every task it covers
    result_on = {a: tuple(reps[t].get(a, a) for t in five) for a in full}
    by_result: dict[tuple, list[str]] = {}
    for a in full:
        by_result.setdefault(result_on[a], []).append(a)
    same_avg = sorted(g for g in by_result.values() if len(g) > 1)
    rep = representatives(same_avg, reference)
    distinct = [a for a in full if rep.get(a, a) == a]
    five_distinct = {t: {a: s for a, s in samples.items() if rep.get(a, a) == a} for t, samples in five.items()}
    cell = {(r.task, r.attention): r for r in ran.itertuples()}
    variances = [sum(cell[t, a].se ** 2 for t in five) / len(five) ** 2 for a in distinct]
    means = [float(np.mean([cell[t, a].mean for t in five])) for a in distinct]
    has_ref = any(reference in s for s in five.values())
    vs_ref = sig.against_average(reference, five_distinct, margin) if has_ref else {}
    best = sig.best_of(distinct, means, variances, lambda a, b: sig.average_difference(a, b, five))
    out[AVG] = {"vs_ref": sig.with_repeats(vs_ref, rep, reference) if vs_ref else {},
                "best": sig.best_with_repeats(best, rep), "same": same_avg, "tasks": ranked, "left_out": chance}
    return out


def _best_text(label: str, best: dict) -> str:
    others = best.get("same_as", {})
    also = {rep: [n for n, r in others.items() if r == rep] for rep in set(others.values())}
    members = sorted((a for a in best["set"] if a not in others), key=lambda a: (-best["p_rank1"][a], a))
    named = {a: "/".join([a, *sorted(also.get(a, []))]) for a in members}  # one result under several names
    total = len(best["p_rank1"]) - len(others)
    if len(members) <= SHOWN_IN_FULL:
        listed = ", ".join(f"{named[a]} {best['p_rank1'][a]:.2f}" for a in members)
        return f"{label} ({len(members)} of {total}): {listed}"
    top = ", ".join(f"{named[a]} {best['p_rank1'][a]:.2f}" for a in members[:3])
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
    if any(v.get("same") for v in verdicts.values()):
        lines.append(f"Variants with the same predictions as another's on every test example and seed (named below "
                     "the table) are one result: each is tested, ranked and counted once -- in Holm's family, in the "
                     "best set's comparisons and P(rank 1) (the result's, repeated under each name in table1.csv, and "
                     "in the best set shown once as a/b), and in the detectable gap -- and every name shows its "
                     f"result's mark; {m[sig.SAME]} = the reference's own predictions (no test made). Cells with a "
                     "collapsed run (they agree for another reason) or a single seed (too little evidence) are never "
                     "one result. ")
    methods = [v["method"] for k, t in verdicts.items() if k != AVG for v in t["vs_ref"].values()
               if v["method"] and "same_as" not in v]  # a result under several names is tested once
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
                     f"majority rate), so shown but left out of the LRA average, the average's marks and its best "
                     f"set (the column's own marks compare runs at chance): {names}. ")
    if average["tasks"]:
        lines.append("The LRA average covers " + ", ".join(TASK_LABELS[t] for t in average["tasks"]) + ". ")
    return "".join(lines)
