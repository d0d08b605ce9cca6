"""A training step of ``run.py`` against the benchmark cell's step for the same model, side by side (issue 45).

In ``--rounds`` rounds, each attention in turn: the model-mode benchmark cell (``lra_bench.bench.cell``
one-shot, a fresh process: the memory step, ``--warmup`` untimed steps, ``--steps`` timed ones) and ``run.py`` (a
fresh process, the same config on synthetic data of the same shape: ``trainer.timing_warmup_steps`` = 1 +
``--warmup``, its first step being the counterpart of the cell's memory step, ``trainer.max_steps`` = that + steps,
one evaluation at the end on 4 examples). Both sides switch glibc to reuse freed memory after that first step, and
the heap then grows to its high-water mark over the next steps (measured at 4K, performer: 15.8, 11.9, 6.7, then
3.8-4.8 s per step), so a warm-up shorter than the trainer's default (5 steps excluded) times that growth, not the
steady step a run gets. Compared: the mean step time,
run.py's from its record (``throughput.timed_seconds / timed_steps``, the time between the start and the end of each
training step: batch, transfer, step, scheduler, hooks) and the cell's over its timed steps. Each row keeps the
1-minute load average around it and the cores other processes used (the cell's ``machine``, the record's).

    python tools/train_vs_bench.py                                   # softmax performer local s4d, text, N=4096
    python tools/train_vs_bench.py --attentions performer --n 1024 --profile cpu --out results/report/train_vs_bench
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import _repo  # noqa: F401  (this checkout's lra_bench first: tools/_repo.py)
from hydra import compose, initialize_config_dir
from scipy import stats

from lra_bench.bench.isolated import run_isolated
from lra_bench.config.sections import CONFIG_DIR, container
from lra_bench.stats.intervals import t_interval
from lra_bench.store.files import write_json_atomic
from lra_bench.store.records import RECORD_NAME, git_commit, read_record

ROOT = Path(__file__).resolve().parents[1]


def overrides(args: argparse.Namespace, attention: str) -> list[str]:
    return [f"attention={attention}", f"task={args.task}", f"profile={args.profile}", "task.source=synthetic",
            f"task.max_len={args.n}", "task.synthetic_sizes=[64,4,4]", f"trainer.batch_size={args.batch}",
            "trainer.eval_batch_size=4", f"trainer.max_steps={1 + args.warmup + args.steps}",
            f"trainer.timing_warmup_steps={1 + args.warmup}", "trainer.checkpoint_every=0", "trainer.device=cpu"]


def cell(args: argparse.Namespace, attention: str, tmp: Path) -> dict:
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("run", overrides=[*overrides(args, attention), f"paths.results_dir={tmp}",
                                        f"paths.cache_dir={tmp}"])
    payload = {"mode": "model", "config": container(cfg), "n": args.n, "batch": args.batch, "warmup": args.warmup,
               "repeats": args.steps, "device": "cpu"}
    res = run_isolated("lra_bench.bench.cell", payload, timeout=args.timeout)
    if res["status"] != "ok":
        raise SystemExit(f"{attention}: benchmark cell {res['status']}: {res.get('message')}")
    return {"step_s": statistics.fmean(res["durations"]), "median_s": res["median_s"], "machine": res["machine"],
            "peak_delta_bytes": res["peak_delta_bytes"]}


def training(args: argparse.Namespace, attention: str, tmp: Path) -> dict:
    command = [sys.executable, "run.py", *overrides(args, attention), "rerun=true", f"paths.results_dir={tmp}/runs",
               f"paths.cache_dir={tmp}/cache"]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=args.timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    records = [read_record(p) for p in Path(tmp, "runs").rglob(RECORD_NAME)]
    if proc.returncode != 0 or len(records) != 1 or records[0]["status"] != "ok":
        raise SystemExit(f"{attention}: run.py failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    t, memory = records[0]["throughput"], records[0]["memory"]
    return {"step_s": t["timed_seconds"] / t["timed_steps"], "timed_steps": t["timed_steps"],
            "warmup_steps_excluded": t["warmup_steps_excluded"], "machine": records[0]["machine"],
            "allocator_reuse": memory["allocator_reuse"], "peak_bytes": memory["peak_bytes"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attentions", nargs="+", default=["softmax", "performer", "local", "s4d"])
    ap.add_argument("--task", default="text")
    ap.add_argument("--profile", default="paper", help="paper: the text model of LRA, dim 256, 4 layers")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=4, help="the benchmark cell's CPU batch")
    ap.add_argument("--warmup", type=int, default=4,
                    help="untimed steps after the first (run.py then excludes 1 + this: the trainer's default 5)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rows: list[dict] = []
    for r in range(args.rounds):  # rounds outside: an interrupted run still holds every attention's first round
        for attention in args.attentions:
            for side, measure in (("cell", cell), ("run.py", training)):
                with tempfile.TemporaryDirectory() as tmp:
                    before = os.getloadavg()[0]
                    row = {"attention": attention, "round": r, "side": side, **measure(args, attention, Path(tmp)),
                           "loadavg_1min": [before, os.getloadavg()[0]]}
                rows.append(row)
                print(f"{attention:>10} round {r} {side:>6}: {row['step_s']:.3f} s/step, load {before:.1f}, other "
                      f"cores {row['machine']['other_cores']}", file=sys.stderr, flush=True)
                write(args, rows)
    print(json.dumps(summarize(rows), indent=2))


def summarize(rows: list[dict]) -> dict[str, dict]:
    """Per attention: run.py's step over the cell's, one ratio per round with both sides measured, their median and,
    from 2 rounds on, their geometric mean with its 95 % t interval and one-sided 95 % upper bound (on the log ratios,
    rounds as independent pairs: the bar "run.py <= 1.1x the cell" is shown when the upper bound is at most 1.1)."""
    summary = {}
    for attention in dict.fromkeys(x["attention"] for x in rows):
        ratios = []
        for r in sorted({x["round"] for x in rows if x["attention"] == attention}):
            sides = {x["side"]: x["step_s"] for x in rows if x["attention"] == attention and x["round"] == r}
            if len(sides) == 2:
                ratios.append(sides["run.py"] / sides["cell"])
        if ratios:
            summary[attention] = {"ratios": ratios, "median_ratio": statistics.median(ratios), **ratio_interval(ratios)}
    return summary


def ratio_interval(ratios: list[float]) -> dict[str, float]:
    """Geometric mean of the ratios, its two-sided 95 % t interval and one-sided 95 % upper bound (none below 2)."""
    if len(ratios) < 2:
        return {}
    logs = [math.log(r) for r in ratios]
    mean, low, high, se = t_interval(logs)
    upper = mean + float(stats.t.ppf(0.95, len(logs) - 1)) * se
    return {"geomean_ratio": math.exp(mean), "ci95": [math.exp(low), math.exp(high)], "upper95": math.exp(upper)}


def write(args: argparse.Namespace, rows: list[dict]) -> None:
    """The rows so far and their summary, replaced atomically after every row (an interrupted run keeps them)."""
    if args.out is None:
        return
    result = {"command": "python tools/train_vs_bench.py " + " ".join(sys.argv[1:]), "commit": git_commit(),
              "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "rows": rows, "summary": summarize(rows)}
    write_json_atomic(args.out / "train_vs_bench.json", result)

if __name__ == "__main__":
    main()
