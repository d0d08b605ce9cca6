"""The power planner (``scripts/plan.py --power GAP``): per task, how many seeds per variant and test examples the
table needs for its paired tests against the reference to find a true gap of GAP points with 80 % power (at 5 % over
the number of variants tested, Holm's first step: :func:`lra_bench.stats.power.detectable_gap`), and what that costs
in run time.

The noise comes from the records' own variance components (:func:`lra_bench.reports.detectable.task_noise`); the
time of a run from the records' own timings: the median over the task's records of its wall time, with the test
evaluation (and the validation evaluations, when the run validated on as many examples as it tested: a larger
``max_eval_examples`` subset enlarges both) scaled by the new number of test examples. Test sets cannot grow past
the task's full split (text 25,000 reviews, image 10,000 images, retrieval 17,437 pairs); ListOps and Pathfinder
are generated, so any size can be made (searched up to ``MAX_GENERATED``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lra_bench.reports.detectable import task_noise
from lra_bench.reports.tasks import TASK_LABELS, TASKS
from lra_bench.stats.paired import ALPHA
from lra_bench.stats.power import POWER, detectable_gap, power
from lra_bench.store.records import run_wall_seconds

#: the full test split of each task whose data is fixed (LRA: IMDb 25k test reviews, CIFAR-10 10k test images, the
#: AAN retrieval test pairs); generated tasks (ListOps, Pathfinder) have no ceiling
FULL_TEST_SET = {"text": 25_000, "image": 10_000, "retrieval": 17_437}
MAX_GENERATED = 100_000
MAX_SEEDS = 20


@dataclass(frozen=True)
class RunTime:
    """Seconds of one run of a task as the records measured it, split into the part that does not depend on the
    number of test examples and the part that grows with it (per test example)."""

    fixed_s: float
    per_example_s: float
    examples: int

    def seconds(self, examples: int) -> float:
        return self.fixed_s + self.per_example_s * examples


def run_time(records: list[dict]) -> RunTime | None:
    """The median run of ``records`` (ok, with ``phases``): wall time minus its evaluations that scale with the
    test set, and those per test example. None without such a record."""
    fixed, per = [], []
    sizes = []
    for r in records:
        ph = r.get("phases")
        n = r.get("test_examples")
        wall = run_wall_seconds(r)  # a resumed run: every process's phases, not only its last process's wall
        if r.get("status") != "ok" or not isinstance(ph, dict) or not n or wall is None:
            continue
        scaled = ph.get("test_eval_s", 0.0) + (ph.get("val_eval_s", 0.0) if r.get("val_examples") == n else 0.0)
        fixed.append(wall - scaled)
        per.append(scaled / n)
        sizes.append(n)
    if not fixed:
        return None
    return RunTime(float(np.median(fixed)), float(np.median(per)), int(np.median(sizes)))


def _smallest_examples(noise, seeds: int, comparisons: int, gap: float, ceiling: int, alpha: float) -> int | None:
    """The fewest test examples with which ``seeds`` seeds find ``gap`` with 80 % power (None: not even ceiling)."""
    def enough(n: int) -> bool:
        return power(gap, noise, seeds, n, comparisons, alpha) >= POWER

    if not enough(ceiling):
        return None
    lo, hi = 2, ceiling
    while hi - lo > max(1, hi // 100):  # to 1 %: the cost is not known better
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi


def plan_task(task: str, samples: dict, records: list[dict], reference: str, gap_points: float,
              max_seeds: int = MAX_SEEDS, alpha: float = ALPHA,
              designs: tuple[tuple[int, int], ...] = (), repeats: int = 0) -> pd.DataFrame:
    """Rows (design, seeds, test_examples, detectable_gap, runs, hours) for one task: the current design, then from
    the fewest seeds that can reach ``gap_points`` (within the task's test set) up to three seeds past the cheapest
    design, each with the fewest test examples that reach it (the cheapest marked), then each of ``designs``
    ((seeds, test examples) the user asks about: "given S x N"). ``samples`` holds each distinct result once
    (:mod:`lra_bench.reports.same_predictions`); ``repeats`` variants more are run (and cost) but repeat one of
    them, so they are no comparison of their own."""
    found = task_noise(samples, reference)
    if found is None:
        raise ValueError(f"{task}: no pair with `{reference}` on one test set with per-example predictions and 2+ "
                         "seeds, so no variance components to plan from")
    timing = run_time(records)
    noise, seeds, examples, comparisons = found
    variants = comparisons + 1 + repeats  # run (and paid for); the comparisons count distinct results
    ceiling = FULL_TEST_SET.get(task, MAX_GENERATED)

    def hours(s: int, n: int) -> float:
        return variants * s * timing.seconds(n) / 3600 if timing else math.nan

    def row(design: str, s: int, n: int) -> dict:
        return {"task": task, "design": design, "seeds": s, "test_examples": n,
                "detectable_gap": 100 * detectable_gap(noise, s, n, comparisons, alpha), "runs": variants * s,
                "hours": hours(s, n), "minutes_per_run": timing.seconds(n) / 60 if timing else math.nan,
                "seed_sd": 100 * math.sqrt(noise.components.seed),
                "example_sd": 100 * math.sqrt(noise.components.paired)}

    feasible = {}
    for s in range(2, max_seeds + 1):
        n = _smallest_examples(noise, s, comparisons, gap_points / 100, ceiling, alpha)
        if n is not None:
            feasible[s] = n
    rows = [row("current", seeds, examples), row("+1 seed", seeds + 1, examples),
            row("2x test examples", seeds, min(2 * examples, ceiling))]
    if feasible:
        cheapest = min(feasible, key=lambda s: (hours(s, feasible[s]), s))
        for s in range(min(feasible), min(max(feasible), cheapest + 3) + 1):
            rows.append(row(f"{s} seeds" + (" (cheapest)" if s == cheapest and timing else ""), s, feasible[s]))
    for s, n in designs:
        if s < 2 or n < 1:
            raise ValueError(f"{task}: design {s} x {n}: a paired test needs >= 2 seeds and >= 1 test example")
        if n > ceiling:
            raise ValueError(f"{task}: design {s} x {n:,}: the test split holds {ceiling:,} examples")
        rows.append(row(f"given {s} x {n:,}", s, n))
    return pd.DataFrame(rows)


def plan_markdown(plans: list[pd.DataFrame], gap_points: float, reference: str, failures: dict[str, str]) -> str:
    """The planner's Markdown: per task, the current design and the designs that reach ``gap_points``."""
    lines = [f"Seeds per variant and test examples for the paired test against `{reference}` to find a true gap of "
             f"{gap_points:g} points with {POWER * 100:.0f} % power (5 % over the number of variants tested, Holm's "
             "first step), from the records' own variance components; hours = every variant's runs one after another "
             "on the records' device, from their own timings (the test evaluation, and validation where it is as "
             "large, scaled with the test examples). Test sets stop at the task's full split.", ""]
    for plan in plans:
        task = plan.task.iloc[0]
        shown = pd.DataFrame({
            "design": plan.design, "seeds": plan.seeds, "test examples": plan.test_examples.map("{:,}".format),
            "detectable gap (points)": [f"{g:.2f}" if math.isfinite(g) else "none" for g in plan.detectable_gap],
            "runs": plan.runs, "hours": [f"{h:.1f}" if math.isfinite(h) else "?" for h in plan.hours]})
        reachable = "" if len(plan) > 1 else (f" No design up to {MAX_SEEDS} seeds and "
                                              f"{FULL_TEST_SET.get(task, MAX_GENERATED):,} test examples reaches "
                                              f"{gap_points:g} points.")
        lines += [f"**{TASK_LABELS.get(task, task)}**.{reachable}", "",
                  shown.to_markdown(index=False, disable_numparse=True), ""]
    for task in TASKS:
        if task in failures:
            lines += [f"**{TASK_LABELS.get(task, task)}**: {failures[task]}", ""]
    return "\n".join(lines)


BUDGET_DESIGNS = ("current", "+1 seed", "2x test examples")


def _gain(r: pd.Series, cur: pd.Series) -> str:
    """A design's detectable gap and the hours it adds to the current one."""
    if r.seeds == cur.seeds and r.test_examples == cur.test_examples:
        return "- (the full split already)"
    return f"{r.detectable_gap:.1f} (+{r.hours - cur.hours:.1f} h)"


def budget_markdown(plans: list[pd.DataFrame], gap_points: float) -> str:
    """The variance budget: per task, the seed and per-example standard deviations (of a paired difference, in
    points), the current design's detectable gap and minutes per run, what one more seed and what twice the test
    examples each buy (gap, and the hours they add over every variant), and the cheapest design for ``gap_points``."""
    rows = []
    for plan in plans:
        by = {d: plan[plan.design == d].iloc[0] for d in BUDGET_DESIGNS}
        cheapest = plan[plan.design.str.endswith("(cheapest)")]
        cur = by["current"]

        best = (f"{int(cheapest.iloc[0].seeds)} x {int(cheapest.iloc[0].test_examples):,}: "
                f"{cheapest.iloc[0].detectable_gap:.1f}, {cheapest.iloc[0].minutes_per_run:.1f} min/run"
                if len(cheapest) else "none reaches it")
        rows.append({"task": TASK_LABELS.get(cur.task, cur.task), "seed sd": f"{cur.seed_sd:.2f}",
                     "example sd": f"{cur.example_sd:.1f}",
                     "now: seeds x examples": f"{int(cur.seeds)} x {int(cur.test_examples):,}",
                     "gap now": f"{cur.detectable_gap:.1f}", "min/run now": f"{cur.minutes_per_run:.1f}",
                     "+1 seed": _gain(by["+1 seed"], cur), "2x examples": _gain(by["2x test examples"], cur),
                     f"cheapest for {gap_points:g}": best})
    head = ("Variance budget (points of accuracy): seed sd = the standard deviation of a variant's accuracy from seed "
            "to seed; example sd = that of one test example's paired difference against the reference (the test "
            "sample's share is example sd / sqrt(examples)); gap = the detectable gap (80 % power, Holm's first step); "
            "+1 seed and 2x examples: the gap each gives and the hours it adds over every variant.")
    return "\n".join([head, "", pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True), ""])
