"""Which operators make a step grow faster than N: ``torch.profiler`` over the benchmark's own step at each length.

A Table 2 cell says how a whole step grows with N (``time exp.``); this says which operators make it so. The step is
built exactly as ``scripts/benchmark.py`` times it (``lra_bench.bench.cell.model_step`` or ``attention_step`` on a
synthetic batch, from the same Hydra overrides; its first step with the default allocator, then freed memory kept
for reuse, as a cell does), ``--warmup`` untimed steps, then ``--steps`` steps under the
profiler, at every ``--n``. The table lists the operators with the most self CPU time at the longest N, each with its
ms per step at every N, its exponent (least squares of log time on log N over the lengths, 95 % interval) and its
share of the step at the longest N, then the rest and the total. Operators whose exponent is above the total's are
what bends the step's curve. Wall time per step is given profiled and, from as many steps just before, not profiled:
where they differ much, the profiler changed the step (seen with S4D's large FFT tensors) and the shares are
suspect. Timings under load are only indicative: run it on a quiet machine.

    python tools/profile_scaling.py attention=s4d model=ssm task=text model.dim=256 --n 1024 4096 16384 \\
        --out results/speed_cpu/s4d_scaling_idle/profile_w256.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import _repo  # noqa: F401  (this checkout's lra_bench first: tools/_repo.py)
import numpy as np
import torch
from _provenance import provenance, write_markdown
from hydra import compose, initialize_config_dir
from torch.profiler import ProfilerActivity, profile

from lra_bench.bench.cell import attention_step, model_step
from lra_bench.config.bench import bench_plan
from lra_bench.errors import LRABenchError
from lra_bench.infra.memory import reuse_freed_memory
from lra_bench.infra.timing import timed_runs
from lra_bench.reports.efficiency import fit_exponent

ROOT = Path(__file__).resolve().parents[1]
MODES = {"model": model_step, "attention": attention_step}


def operator_times(mode: str, config: dict, n: int, batch: int, warmup: int,
                   steps: int) -> tuple[dict[str, float], float, float]:
    """({operator: self CPU ms per step}, wall ms per profiled step, median wall ms of as many steps before them,
    not profiled) of the benchmark's step at length ``n``."""
    cfg = {**config, "task": {**config["task"], "max_len": n}}
    step, _ = MODES[mode](cfg, n, batch, torch.device("cpu"))
    step()  # as a benchmark cell: its memory step with the default allocator, then freed memory kept for reuse
    reuse_freed_memory()
    for _ in range(warmup):
        step()
    plain = statistics.median(timed_runs(step, torch.device("cpu"), steps)) * 1e3
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        wall = (time.perf_counter() - t0) * 1e3 / steps
    times: dict[str, float] = defaultdict(float)
    for e in prof.key_averages():
        if e.self_cpu_time_total > 0:
            times[e.key] += e.self_cpu_time_total / 1e3 / steps
    return dict(times), wall, plain


def scaling_table(ns: list[int], per_n: list[dict[str, float]], walls: list[float], plain: list[float],
                  top: int) -> str:
    """The markdown table: the ``top`` operators at the longest N, the rest, the total, and the wall time per step
    profiled and not (where the two differ much, the profiler changed the step and the shares are suspect)."""
    longest = per_n[-1]
    names = sorted(longest, key=longest.get, reverse=True)[:top]
    total_long = sum(longest.values())

    def row(label: str, values: list[float]) -> str:
        fit = fit_exponent(np.array(ns), np.array(values))
        share = "" if label.startswith("wall") else f"{100 * values[-1] / total_long:.1f} %"
        cells = " | ".join(f"{v:.1f}" for v in values)
        return f"| {label} | {cells} | {fit.text()} | {share} |"

    lines = ["| operator | " + " | ".join(f"ms at N={n}" for n in ns) + " | exponent [95 %] | share at longest |",
             "|---" * (len(ns) + 3) + "|"]
    lines += [row(f"`{name}`", [t.get(name, 0.0) for t in per_n]) for name in names]
    lines.append(row("the rest", [sum(v for k, v in t.items() if k not in names) for t in per_n]))
    lines.append(row("**total self CPU**", [sum(t.values()) for t in per_n]))
    lines.append(row("wall per step, profiled", walls))
    lines.append(row("wall per step, not profiled (median)", plain))
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="Hydra overrides of configs/benchmark.yaml, as for "
                                                 "scripts/benchmark.py (attention=s4d model=ssm ...)")
    ap.add_argument("--n", nargs="+", type=int, required=True, help="lengths, at least 3 for an exponent")
    ap.add_argument("--mode", choices=sorted(MODES), default="model")
    ap.add_argument("--batch", type=int, default=None, help="default: the benchmark's (bench.batch_size)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if len(set(args.n)) < 3:
        ap.error(f"--n needs at least 3 distinct lengths for an exponent, got {args.n}")
    try:
        with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
            cfg = compose(config_name="benchmark", overrides=args.overrides)
        bp = bench_plan(cfg)
    except LRABenchError as e:
        sys.exit(f"error: {e}")
    if bp.device.type != "cpu":
        sys.exit(f"error: tools/profile_scaling.py profiles on CPU only (bench.device resolved to {bp.device}); "
                 "add bench.device=cpu")
    ns = sorted(set(args.n))
    batch = args.batch or bp.batch
    torch.manual_seed(0)
    load_start = os.getloadavg()[0]
    results = [operator_times(args.mode, bp.config, n, batch, args.warmup, args.steps) for n in ns]
    header = (f"# Operators against N: {bp.attention}, {args.mode} mode\n\n{provenance('profile_scaling.py')}1-minute "
              f"load {load_start:.1f} at the start and {os.getloadavg()[0]:.1f} at the end. Task {bp.task}, "
              f"profile {bp.profile}, dim {bp.config['model']['dim']}, batch {batch}, forward + backward (and the "
              f"optimizer in model mode), {args.steps} profiled steps after {args.warmup} at each N; self CPU time "
              f"summed per operator.\n")
    write_markdown(header + "\n" + scaling_table(ns, [r[0] for r in results], [r[1] for r in results],
                                                  [r[2] for r in results], args.top), args.out)


if __name__ == "__main__":
    main()
