"""S4D's kernel now (Ā^l = Ā^(jT)·Ā^t, T ≈ √L) against the full Vandermonde matrix it replaced, side by side (issue 45).

Issue 45 asks for a time exponent of at most 1.1 from 1K to 16K at width 256 with width 128 unchanged. A Table 2
cell gives one kernel's exponent; this gives both kernels' in one run, in turns, so that "unchanged" is a measured
ratio and not two runs on different days. The step is the benchmark's own (``lra_bench.bench.cell.model_step`` or
``attention_step`` from the same Hydra overrides as ``scripts/benchmark.py``); the reference side replaces every
``S4DKernel``'s forward, while its steps run, by the Vandermonde product it had before 2651f2b
(``S4DKernel.vandermonde``, the reference ``tests/test_s4d_kernel.py`` checks the new kernel against), on a model of its
own with the same weights. At each N: one memory
step per side with the default allocator, then freed memory kept for reuse (as a cell), ``--warmup`` steps per side,
then ``--rounds`` bursts per side in turns, each burst re-warming 2 steps and timing ``--steps``. Reported: the
median step per side and N, the ratio now / Vandermonde with a 95 % bootstrap interval of the ratio of medians
(4,000 resamples, seeded 0), each side's exponent with its 95 % interval (least squares over the lengths), and
per side and N the cores other processes kept busy while its bursts ran (``machine`` in the .json, as a benchmark
cell records it; ``busy`` where they took more than the spare cores). Run it on an idle machine.

    python tools/s4d_kernel_ab.py attention=s4d model=ssm task=text model.dim=128 --n 1024 2048 4096 8192 16384 \\
        --out results/speed_cpu/s4d_kernel_ab/width128.md
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import _repo  # noqa: F401  (this checkout's lra_bench first: tools/_repo.py)
import numpy as np
import torch
from _provenance import provenance, write_markdown
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException

from lra_bench.attention.s4d import S4DKernel
from lra_bench.bench.cell import attention_step, model_step
from lra_bench.config.bench import bench_plan
from lra_bench.errors import LRABenchError
from lra_bench.infra.machine import CoreUse
from lra_bench.infra.memory import reuse_freed_memory
from lra_bench.infra.timing import timed_runs
from lra_bench.reports.efficiency import fit_exponent

ROOT = Path(__file__).resolve().parents[1]
MODES = {"model": model_step, "attention": attention_step}
REWARM = 2
RESAMPLES = 4000
SIDES = ("now", "vandermonde")


@contextlib.contextmanager
def kernel_of(side: str) -> Iterator[None]:
    """Within it, every S4DKernel computes the kernel of ``side``: "now" (the class's own) or "vandermonde"."""
    own = S4DKernel.forward
    if side == "vandermonde":
        S4DKernel.forward = S4DKernel.vandermonde
    try:
        yield
    finally:
        S4DKernel.forward = own


def steps_at(mode: str, config: dict, n: int, batch: int) -> dict[str, Callable[[], None]]:
    """Each side's step at length ``n`` (a model of its own, both built from seed 0: the same weights), run under
    that side's kernel."""
    cfg = {**config, "task": {**config["task"], "max_len": n}}
    out = {}
    for side in SIDES:
        torch.manual_seed(0)
        step, _ = MODES[mode](cfg, n, batch, torch.device("cpu"))

        def run(step=step, side=side) -> None:
            with kernel_of(side):
                step()

        out[side] = run
    return out


def bootstrap(a: list[float], b: list[float], rng: random.Random) -> tuple[float, float]:
    """95 % bootstrap interval of median(a) / median(b)."""
    boots = sorted(statistics.median(rng.choices(a, k=len(a))) / statistics.median(rng.choices(b, k=len(b)))
                   for _ in range(RESAMPLES))
    return boots[int(0.025 * RESAMPLES)], boots[int(0.975 * RESAMPLES) - 1]


def measure(steps: dict, warmup: int, rounds: int, repeats: int) -> tuple[dict[str, list[float]], dict[str, dict]]:
    """Every timed step per side, and per side the machine while its bursts ran (``CoreUse``: the cores other
    processes kept busy, ``busy`` when they took more than the spare ones, as a benchmark cell records)."""
    cpu = torch.device("cpu")
    for step in steps.values():
        step()  # the memory step, default allocator
    reuse_freed_memory()
    for step in steps.values():
        for _ in range(warmup):
            step()
    times: dict[str, list[float]] = {side: [] for side in steps}
    use = {side: CoreUse(threads=torch.get_num_threads()) for side in steps}
    for _ in range(rounds):
        for side, step in steps.items():
            for _ in range(REWARM):
                step()
            with use[side].measuring():
                times[side] += timed_runs(step, cpu, repeats)
    return times, {side: u.summary() for side, u in use.items()}


def load_text(machine: dict[str, dict]) -> str:
    """The table's cell for one N: other processes' cores while each side was timed, ``busy`` where they were."""
    def one(m: dict) -> str:
        if m["other_cores"] is None:
            return "?"
        return f"{m['other_cores']:.2f}" + (" busy" if m["busy"] else "")
    return " / ".join(one(machine[side]) for side in SIDES)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="Hydra overrides of configs/benchmark.yaml (attention=s4d ...)")
    ap.add_argument("--n", nargs="+", type=int, required=True, help="lengths, at least 3 for an exponent")
    ap.add_argument("--mode", choices=sorted(MODES), default="model")
    ap.add_argument("--batch", type=int, default=None, help="default: the benchmark's (bench.batch_size)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5, help="timed steps per burst")
    ap.add_argument("--out", type=Path, default=None, help="markdown table; a .json of every step beside it")
    args = ap.parse_args()
    if len(set(args.n)) < 3:
        ap.error(f"--n needs at least 3 distinct lengths for an exponent, got {args.n}")
    try:
        with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
            bp = bench_plan(compose(config_name="benchmark", overrides=args.overrides))
    except (LRABenchError, HydraException) as e:  # ours, or an unknown group option or key in the overrides
        sys.exit(f"error: {e}")
    if bp.attention != "s4d":
        sys.exit(f"error: tools/s4d_kernel_ab.py compares S4D's two kernels; got attention={bp.attention} "
                 "(add attention=s4d)")
    if bp.device.type != "cpu":
        sys.exit(f"error: tools/s4d_kernel_ab.py times on CPU only (bench.device resolved to {bp.device})")
    ns, batch, rng = sorted(set(args.n)), args.batch or bp.batch, random.Random(0)
    load_start = os.getloadavg()[0]
    rows, raw, machine = [], {}, {}
    for n in ns:
        try:
            times, machine[str(n)] = measure(steps_at(args.mode, bp.config, n, batch), args.warmup, args.rounds,
                                             args.steps)
        except LRABenchError as e:
            sys.exit(f"error: {e}")
        now, old = statistics.median(times["now"]), statistics.median(times["vandermonde"])
        low, high = bootstrap(times["now"], times["vandermonde"], rng)
        rows.append((n, now, old, now / old, low, high))
        raw[str(n)] = times
        print(f"N={n}: now {now:.3f} s, vandermonde {old:.3f} s, ratio {now / old:.3f} [{low:.3f}, {high:.3f}]",
              file=sys.stderr, flush=True)
    fits = {side: fit_exponent(np.array(ns), np.array([r[i] for r in rows])) for side, i in (("now", 1),
                                                                                             ("vandermonde", 2))}
    lines = ["| N | now (s) | Vandermonde (s) | now / Vandermonde [95 %] | other cores (now / Vandermonde) |",
             "|---|---|---|---|---|"]
    lines += [f"| {n} | {a:.3f} | {b:.3f} | {r:.3f} [{lo:.3f}, {hi:.3f}] | {load_text(machine[str(n)])} |"
              for n, a, b, r, lo, hi in rows]
    lines.append(f"| exponent [95 %] | {fits['now'].text()} | {fits['vandermonde'].text()} | | |")
    header = (f"# S4D's kernel now against the full Vandermonde matrix, {args.mode} mode\n\n"
              f"{provenance('s4d_kernel_ab.py')}1-minute load {load_start:.1f} at the start and "
              f"{os.getloadavg()[0]:.1f} at the end. Task {bp.task}, profile {bp.profile}, dim "
              f"{bp.config['model']['dim']}, batch {batch}, {torch.get_num_threads()} threads, forward + backward "
              f"(and the optimizer in model mode); median of {args.rounds} x {args.steps} steps per side after "
              f"{args.warmup}, in turns, each burst re-warming {REWARM}.\n")
    write_markdown(header + "\n" + "\n".join(lines) + "\n", args.out)
    if args.out is not None:
        args.out.with_suffix(".json").write_text(json.dumps(
            {"n": ns, "steps_s": raw, "machine": machine,
             "exponents": {k: [v.value, v.lo, v.hi] for k, v in fits.items()}},
            indent=1))


if __name__ == "__main__":
    main()
