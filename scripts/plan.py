"""Planning from run records, two ways.

The planning table: whole-run wall time of each task's protocol per variant (``lra_bench.reports.planning``). Full
runs are measured; shortened runs of the same protocol are projected. The protocol of each task (max_steps,
eval_every) is read from ``configs/task_profile/<task>_<profile>.yaml``.

    # probes on the GPU: the paper protocol with fewer steps (full data, full evaluation split)
    python run.py -m attention=flash,linformer,performer,bigbird task=listops profile=paper trainer.max_steps=300
    python scripts/plan.py --runs-dir results/runs --profile paper --out results/report/planning.md

The power plan (``--power GAP``, ``lra_bench.reports.power_plan``): per task, the seeds per variant and test examples
with which the paired tests against the reference find a true gap of GAP accuracy points with 80 % power, from the
records' own variance components and timings, and what each design costs in run time:

    python scripts/plan.py --power 3 --runs-dir results/cpu/runs      # the curated CPU sweep: 3-point gaps
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import _repo  # noqa: F401  (this checkout's lra_bench first: scripts/_repo.py)
from omegaconf import OmegaConf

from lra_bench.reports.paper import TASKS
from lra_bench.reports.planning import Protocol, planning_markdown, planning_table
from lra_bench.reports.power_plan import MAX_SEEDS, budget_markdown, plan_markdown, plan_task
from lra_bench.reports.same_predictions import groups, representatives
from lra_bench.reports.table1 import REFERENCE, load_runs, pick_profile, task_cells
from lra_bench.store.files import atomic_open
from lra_bench.store.records import read_tree

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def protocols(profile: str) -> dict[str, Protocol]:
    """{task: Protocol} of every task with a ``<task>_<profile>.yaml``."""
    found = {}
    for task in [*TASKS, "pathx"]:
        path = CONFIGS / "task_profile" / f"{task}_{profile}.yaml"
        if path.is_file():
            trainer = OmegaConf.load(path).get("trainer", {})
            if "max_steps" in trainer and "eval_every" in trainer:
                found[task] = Protocol(int(trainer.max_steps), int(trainer.eval_every))
    return found


def power_plan(args, records: list[dict]) -> int:
    """--power: the seeds and test examples each task needs, written to --out (Markdown) and its CSV."""
    runs = load_runs(args.runs_dir)
    profile = args.profile or pick_profile(runs)
    if profile is None:
        print(f"no run records under {args.runs_dir}", file=sys.stderr)
        return 1
    cells = task_cells(runs, profile)
    plans, failures = [], {}
    same = groups(cells)  # one result under several names (bigbird, longformer = flash at quick) is one comparison
    for task, g in cells[cells.n > 0].groupby("task", sort=False):
        rep = representatives(same.get((profile, task), []), args.reference)
        samples = {a: s for a, s in zip(g.attention, g["sample"], strict=True) if rep.get(a, a) == a}
        mine = [r for r in records if r.get("task") == task and r.get("profile") == profile]
        try:
            plans.append(plan_task(task, samples, mine, args.reference, args.power, args.max_seeds,
                                   designs=tuple(args.design.get(task, ())), repeats=len(g) - len(samples)))
        except ValueError as e:
            failures[task] = str(e)
    plans.sort(key=lambda p: [*TASKS, "pathx"].index(p.task.iloc[0]) if p.task.iloc[0] in TASKS else 99)
    out = args.out or Path("results/report/power_plan.md")
    text = (f"# Seeds and test examples for a {args.power:g}-point gap (profile `{profile}`)\n\n"
            f"Regenerate: `python scripts/plan.py --power {args.power:g} --runs-dir {args.runs_dir} --profile "
            f"{profile}`\n\n" + (budget_markdown(plans, args.power) + "\n" if plans else "")
            + plan_markdown(plans, args.power, args.reference, failures))
    with atomic_open(out) as f:
        f.write(text)
    if plans:
        import pandas as pd

        with atomic_open(out.with_suffix(".csv")) as f:
            pd.concat(plans, ignore_index=True).to_csv(f, index=False)
    print(text)
    return 0 if plans else 1


def parse_designs(ap: argparse.ArgumentParser, given: list[str]) -> dict[str, list[tuple[int, int]]]:
    """``--design TASK=SEEDSxEXAMPLES`` values as {task: [(seeds, examples)]}; a malformed one stops with the form."""
    designs: dict[str, list[tuple[int, int]]] = {}
    for text in given:
        task, _, design = text.partition("=")
        seeds, _, examples = design.lower().partition("x")
        if task not in TASKS or not seeds.isdigit() or not examples.replace(",", "").isdigit():
            ap.error(f"--design {text}: expected TASK=SEEDSxEXAMPLES with TASK one of {', '.join(TASKS)} "
                     "(e.g. --design listops=3x10000)")
        designs.setdefault(task, []).append((int(seeds), int(examples.replace(",", ""))))
    return designs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs-dir", type=Path, default=Path("results/runs"))
    ap.add_argument("--profile", default=None,
                    help="the protocol to plan for (configs/task_profile/*_PROFILE; default paper), or with --power "
                         "the records' profile (default: the one with the most results)")
    ap.add_argument("--out", type=Path, default=None,
                    help="where to write (default results/report/planning.md, with --power results/report/"
                         "power_plan.md)")
    ap.add_argument("--power", type=float, default=None, metavar="GAP",
                    help="plan seeds and test examples per task to find a true gap of GAP accuracy points with 80 %% "
                         "power, from the records' variance components and timings")
    ap.add_argument("--reference", default=REFERENCE, help=f"with --power: the variant tested against (default "
                                                            f"{REFERENCE})")
    ap.add_argument("--max-seeds", type=int, default=MAX_SEEDS,
                    help=f"with --power: the most seeds per variant considered (default {MAX_SEEDS})")
    ap.add_argument("--design", action="append", default=[], metavar="TASK=SEEDSxEXAMPLES",
                    help="with --power: also the detectable gap of this design (e.g. listops=3x10000; repeatable), "
                         "from the same variance components")
    args = ap.parse_args(argv)
    args.design = parse_designs(ap, args.design)
    if args.power is not None and not args.power > 0:
        ap.error(f"--power {args.power}: the gap must be a positive number of accuracy points")
    found, skipped = read_tree(args.runs_dir, "record.json")
    for path in skipped:
        print(f"skipped (unreadable or bad checksum): {path}", file=sys.stderr)
    if args.power is not None:
        return power_plan(args, [r for _, r in found])
    args.profile = args.profile or "paper"
    args.out = args.out or Path("results/report/planning.md")
    records = [r for _, r in found if r.get("profile") == args.profile]
    table = planning_table(records, protocols(args.profile))
    text = (f"# Whole-run wall time per task (profile `{args.profile}`)\n\n"
            f"Regenerate: `python scripts/plan.py --runs-dir {args.runs_dir} --profile {args.profile}`\n\n"
            + planning_markdown(table))
    with atomic_open(args.out) as f:
        f.write(text)
    if not table.empty:
        with atomic_open(args.out.with_suffix(".csv")) as f:
            table.to_csv(f, index=False)
    print(text)
    return 0 if not table.empty else 1


if __name__ == "__main__":
    sys.exit(main())
