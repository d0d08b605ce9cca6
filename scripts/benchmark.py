"""Efficiency benchmark (LRA Table 2 protocol) on your hardware: see configs/benchmark.yaml.

For each length and mode, one cell runs in a fresh process (memory isolation) with warm-up and repeats;
its result is written atomically to ``<paths.bench_dir>/<device>/<attention>/<mode>-N<n>-b<batch>-<hash>.json``.
Finished cells are skipped, so an interrupted benchmark resumes; OOM, failures and timeouts are recorded as
such and the benchmark goes on. With ``-m attention=a,b,c`` every job's config is checked first, then the
variants' cells of each length are timed in turns (``bench.interleaved``), so that a change of the machine's load
hits them alike.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import _repo  # noqa: F401  (this checkout's lra_bench first: scripts/_repo.py)
import hydra
from omegaconf import DictConfig

from lra_bench.bench.table2 import run_benchmarks
from lra_bench.config.bench import BenchPlan, bench_plan
from lra_bench.config.mixers import ENV as MIXERS_ENV
from lra_bench.config.mixers import register_outside_mixers
from lra_bench.config.overrides import check_overrides
from lra_bench.errors import LRABenchError

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
PLANS: list[BenchPlan] = []  # one per Hydra job (every job of a -m sweep runs in this process, one after another)


@hydra.main(config_path="../configs", config_name="benchmark", version_base="1.3")
def main(cfg: DictConfig) -> None:
    try:
        PLANS.append(bench_plan(cfg))
    except LRABenchError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    try:  # your own mixers, one file each (LRA_MIXERS), as for run.py
        register_outside_mixers(os.environ.get(MIXERS_ENV))
    except LRABenchError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    problem = check_overrides(sys.argv[1:], CONFIG_DIR, "benchmark")  # a misspelt option or key: the closest one
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)
    main()
    try:
        run_benchmarks(PLANS)
    except LRABenchError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
