"""Entry point: ``python run.py attention=NAME task=TASK profile=PROFILE`` (see configs/run.yaml).

Single run: trains in this process. Multirun (``-m``, ``+sweep=lra``, any launcher): every job re-executes
this script in a fresh child process with the job's overrides, so each job's peak memory is its own and a
crash or kill of one job is recorded without stopping the sweep; SIGTERM/SIGUSR2 are forwarded so the child
checkpoints before a preemption.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from lra_bench.errors import LRABenchError

log = logging.getLogger("lra_bench")
CHILD_ENV = "LRA_BENCH_JOB_CHILD"
EXIT_CONFIG, EXIT_FAILED, EXIT_PREEMPTED = 2, 1, 75  # 75 = EX_TEMPFAIL: rerun to resume


def run_job_in_child(cfg: DictConfig) -> float | None:
    """Run this multirun job in a fresh process; record a failure if the child dies without a record."""
    from lra_bench.runner import record_crash

    hc = HydraConfig.get()
    cmd = [sys.executable, str(Path(__file__).resolve()), *hc.overrides.task, "hydra.mode=RUN",
           f"hydra.run.dir={hc.runtime.output_dir}", "hydra.output_subdir=null"]
    sweep = Path(hc.sweep.dir).name  # groups the sweep's wandb runs
    proc = subprocess.Popen(cmd, env={**os.environ, CHILD_ENV: "1", "LRA_BENCH_SWEEP": sweep})
    forward = {sig: signal.signal(sig, lambda s, f: proc.send_signal(s)) for sig in (signal.SIGTERM, signal.SIGUSR2)}
    try:
        code = proc.wait()
    finally:
        for sig, old in forward.items():
            signal.signal(sig, old)
    if code == EXIT_PREEMPTED:
        raise RuntimeError(f"job {hc.job.num} preempted; checkpoint written, re-run the sweep to resume")
    if code == EXIT_CONFIG:
        raise RuntimeError(f"job {hc.job.num} has an invalid configuration (see its log above)")
    record = record_crash(cfg, code) if code not in (0, EXIT_FAILED) else None
    if record is None:
        from lra_bench.runner import existing_record

        record = existing_record(cfg)
    return None if record is None else record.get("test_acc")


@hydra.main(config_path="configs", config_name="run", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    from lra_bench.runner import run
    from lra_bench.train.loop import Preempted

    if HydraConfig.get().mode == RunMode.MULTIRUN and not os.environ.get(CHILD_ENV):
        return run_job_in_child(cfg)
    try:
        record = run(cfg)
    except LRABenchError as e:
        log.error("%s", e)
        print(f"error: {e}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    except Preempted as e:
        print(f"preempted: {e}", file=sys.stderr)
        sys.exit(EXIT_PREEMPTED)
    if record["status"] != "ok":
        print(f"run ended with status {record['status']}: {record['message']}", file=sys.stderr)
        sys.exit(EXIT_FAILED)
    return record["test_acc"]


if __name__ == "__main__":
    main()
