"""The planning table: whole-run wall time of each task's protocol per variant, from run records
(``lra_bench.reports.planning``). Full runs are measured; shortened runs of the same protocol are projected.

    # probes on the GPU: the paper protocol with fewer steps (full data, full evaluation split)
    python run.py -m attention=flash,linformer,performer,bigbird task=listops profile=paper trainer.max_steps=300
    python scripts/plan.py --runs-dir results/runs --profile paper --out results/report/planning.md

The protocol of each task (max_steps, eval_every) is read from ``configs/task_profile/<task>_<profile>.yaml``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import _repo  # noqa: F401  (this checkout's lra_bench first: scripts/_repo.py)
from omegaconf import OmegaConf

from lra_bench.reports.paper import TASKS
from lra_bench.reports.planning import Protocol, planning_markdown, planning_table
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs-dir", type=Path, default=Path("results/runs"))
    ap.add_argument("--profile", default="paper", help="the protocol to plan for (configs/task_profile/*_PROFILE)")
    ap.add_argument("--out", type=Path, default=Path("results/report/planning.md"))
    args = ap.parse_args()
    found, skipped = read_tree(args.runs_dir, "record.json")
    for path in skipped:
        print(f"skipped (unreadable or bad checksum): {path}", file=sys.stderr)
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
