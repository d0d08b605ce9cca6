"""The planning table: whole-run wall time of each task's protocol per variant, from run records.

A record of a full run gives its measured wall time. A record of a shortened run of the same protocol (a probe:
the paper profile with fewer ``trainer.max_steps``, full data and the protocol's evaluation split) gives a
projection, from its own measurements (``phases`` of the record):

    whole run = data + fixed + max_steps / steps_per_s + evals · (val_eval_s / val_evals) + test_eval_s + other

where ``fixed`` = the training loop's time not explained by its timed steps and evaluations (warm-up steps,
compilation, checkpoints), and ``other`` = the record's wall time outside data, loop and test (start-up, model
build, record writing). Evaluations: one every ``eval_every`` steps and one after the last step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from lra_bench.store.records import protocol_of, run_wall_seconds

OVERNIGHT_HOURS = 12.0


@dataclass(frozen=True)
class Protocol:
    """What a whole run of a task does: ``max_steps`` optimizer steps, validation every ``eval_every``."""

    max_steps: int
    eval_every: int

    @property
    def evals(self) -> int:
        return self.max_steps // self.eval_every + (1 if self.max_steps % self.eval_every else 0)


def whole_run_seconds(record: dict, protocol: Protocol) -> tuple[float, str]:
    """(seconds, "measured" | "projected from K steps") for one ok record with ``phases``."""
    trainer = record["config"]["trainer"]
    if trainer["max_steps"] == protocol.max_steps and trainer["eval_every"] == protocol.eval_every:
        return run_wall_seconds(record), "measured"  # a resumed run: every process's phases
    ph, tp = record["phases"], record["throughput"]
    per_step = 1.0 / tp["steps_per_s"]
    per_eval = ph["val_eval_s"] / ph["val_evals"]
    fixed = max(0.0, ph["train_loop_s"] - ph["val_eval_s"] - record["steps"] * per_step)
    other = max(0.0, run_wall_seconds(record) - ph["data_s"] - ph["train_loop_s"] - ph["test_eval_s"])
    seconds = (ph["data_s"] + fixed + protocol.max_steps * per_step + protocol.evals * per_eval
               + ph["test_eval_s"] + other)
    return seconds, f"projected from {record['steps']} steps"


def planning_table(records: list[dict], protocols: dict[str, Protocol]) -> pd.DataFrame:
    """One row per (task, attention): the newest ok record's whole-run time, full runs preferred over probes. Runs
    trained from scratch only (LRA's protocol): a self-pretrained run's wall time holds another phase."""
    rows = []
    for r in records:
        if r.get("status") != "ok" or r["task"] not in protocols or "phases" not in r:
            continue
        if protocol_of(r.get("config")) != "scratch":
            continue
        protocol = protocols[r["task"]]
        seconds, how = whole_run_seconds(r, protocol)
        ph = r["phases"]
        rows.append({
            "task": r["task"], "attention": r["attention"], "device": r["device"], "compiled": r.get("compiled"),
            "max_steps": protocol.max_steps, "steps_per_s": r["throughput"]["steps_per_s"],
            "s_per_eval": ph["val_eval_s"] / ph["val_evals"] if ph["val_evals"] else math.nan,
            "evals": protocol.evals, "data_s": ph["data_s"], "hours": seconds / 3600, "how": how,
            "full": how == "measured", "finished_at": r.get("finished_at", ""),
        })
    if not rows:
        return pd.DataFrame()
    df = pd.DataFrame(rows).sort_values(["full", "finished_at"])
    df = df.drop_duplicates(["task", "attention"], keep="last")  # a full run beats a probe, then the newest
    return df.sort_values(["task", "hours"]).reset_index(drop=True).drop(columns=["full", "finished_at"])


def planning_markdown(table: pd.DataFrame) -> str:
    """The table, then per task: the measured variants' total and what fits in one night on one device."""
    if table.empty:
        return "(no ok records with phases for a known protocol)\n"
    shown = table.assign(
        steps_per_s=table.steps_per_s.map(lambda v: f"{v:.2f}"), s_per_eval=table.s_per_eval.map(lambda v: f"{v:.2f}"),
        data_s=table.data_s.map(lambda v: f"{v:.0f}"), hours=table.hours.map(lambda v: f"{v:.2f}"))
    lines = [shown.to_markdown(index=False), "", f"Per task, the variants above one after another on one device "
             f"(\"overnight\" = {OVERNIGHT_HOURS:.0f} h):", ""]
    for task, g in table.groupby("task"):
        total = g.hours.sum()
        fits = "fits in one night" if total <= OVERNIGHT_HOURS else (
            f"needs {math.ceil(total / OVERNIGHT_HOURS)} nights on one device, or a cluster "
            f"(`hydra/launcher=slurm`)")
        lines.append(f"- {task}: {len(g)} variants, {total:.2f} h in all ({fits}); mean {g.hours.mean():.2f} h per run")
    return "\n".join(lines) + "\n"
