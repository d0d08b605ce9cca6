"""Entry point: ``python run.py attention=NAME task=TASK profile=PROFILE`` (see configs/run.yaml).

Single run: trains in this process. Multirun (``-m``, ``+sweep=lra``, any launcher): every job re-executes
this script in a fresh child process with the job's overrides, so each job's peak memory is its own and a
crash or kill of one job is recorded without stopping the sweep, which then exits with code 1; SIGTERM/SIGUSR2
are forwarded so the child checkpoints before a preemption, and end the process with code 75 while it starts.
Under SLURM (submitit) the job's process then hands the signal to submitit, which requeues the job; the requeued
job resumes from the checkpoint. A sweep's parent whose jobs run in worker processes (joblib) passes the signal to
every running job, waits for their checkpoints, and exits 75.
"""

from __future__ import annotations

import signal
import sys

EXIT_CONFIG, EXIT_FAILED, EXIT_BUSY, EXIT_PREEMPTED = 2, 1, 3, 75  # 75 = EX_TEMPFAIL: rerun to resume
SWEEP_SIGNALS = (signal.SIGTERM, signal.SIGUSR2)


def _on_signal_while_starting(signum: int, frame: object) -> None:
    """Until a run (``runner.stop_on_signals``) or a sweep's parent (``_on_sweep_signal``) takes the signals over --
    imports, config composition, the model build -- a preemption ends the process with the requeue code, not 143:
    nothing has started that could be lost."""
    print(f"preempted: {signal.Signals(signum).name} while starting, before any run began; "
          "rerun the same command", file=sys.stderr)
    raise SystemExit(EXIT_PREEMPTED)


for _sig in SWEEP_SIGNALS:  # first of all, before the slow imports below
    signal.signal(_sig, _on_signal_while_starting)

import contextlib  # noqa: E402 - after the signal handlers on purpose
import logging  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from hydra.types import RunMode  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from lra_bench.errors import DiskFullError, JobFailed, LRABenchError, RunInProgress  # noqa: E402
from lra_bench.progress import SWEEP_JOB_ENV  # noqa: E402
from lra_bench.suggest import check_overrides  # noqa: E402

log = logging.getLogger("lra_bench")
CONFIG_DIR = Path(__file__).resolve().parent / "configs"
CHILD_ENV = SWEEP_JOB_ENV  # marks the process of a multirun job (no progress bars there)
JOB_STOP_WAIT_S = 120  # how long a sweep's parent waits for its jobs to checkpoint after passing them a signal
# the running job's process; the preemption signal the sweep got; the handlers ours replaced (a scheduler's)
_sweep = {"child": None, "signal": None, "previous": {}}


def _job_processes() -> list[int]:
    """The sweep jobs' processes below this one (marked by CHILD_ENV; not their own children), from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])  # fields after "(comm)": state, ppid, ...
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    marker = f"{CHILD_ENV}=1".encode()
    jobs, todo = [], list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker in environ:
            jobs.append(pid)
        else:
            todo.extend(children.get(pid, []))
    return jobs


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except (OSError, IndexError):
        return False


def _on_parent_signal(signum: int, frame: object) -> None:
    """In a sweep's parent whose jobs run in worker processes (joblib): pass the signal to every running job (each
    checkpoints and exits 75), wait for them, and end the sweep with 75. With no job running: as while starting."""
    jobs = _job_processes()
    if not jobs:
        _on_signal_while_starting(signum, frame)
    for pid in jobs:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
    deadline = time.monotonic() + JOB_STOP_WAIT_S
    while (left := [pid for pid in jobs if _running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    if left:
        log.warning("jobs %s did not stop within %ss of %s", left, JOB_STOP_WAIT_S, signal.Signals(signum).name)
    stop_sweep(f"{signal.Signals(signum).name} passed to the {len(jobs)} running job(s)")


def _on_sweep_signal(signum: int, frame: object) -> None:
    """In a sweep's parent: pass the signal to the running job (it checkpoints) and start no further job."""
    _sweep["signal"] = signum
    if _sweep["child"] is not None:
        _sweep["child"].send_signal(signum)


def stop_sweep(why: str) -> None:
    """End the whole multirun for requeueing: finished records stay, a rerun of the sweep resumes the rest."""
    print(f"preempted: {why}; every finished record is kept, rerun the same sweep command to resume",
          file=sys.stderr)
    raise SystemExit(EXIT_PREEMPTED)  # not an Exception: Hydra's launcher does not catch it and start the next job


def run_job_in_child(cfg: DictConfig) -> float | None:
    """Run this multirun job in a fresh process. A job that does not end ok has a record (its own, or a ``failed``
    or ``killed`` one written here when the process died without one) and raises ``JobFailed``: Hydra runs the
    remaining jobs, then the sweep exits with code 1."""
    from lra_bench.runner import job_record, record_crash

    hc = HydraConfig.get()
    for sig in SWEEP_SIGNALS:  # for the parent's whole life: a signal between two jobs also stops the sweep
        previous = signal.signal(sig, _on_sweep_signal)
        if previous not in (_on_sweep_signal, _on_parent_signal, _on_signal_while_starting):
            _sweep["previous"][sig] = previous  # submitit's, in a SLURM job: it requeues the job
    if _sweep["signal"] is not None:
        stop_sweep(f"{signal.Signals(_sweep['signal']).name} received before job {hc.job.num}")
    cmd = [sys.executable, str(Path(__file__).resolve()), *hc.overrides.task, "hydra.mode=RUN",
           f"hydra.run.dir={hc.runtime.output_dir}", "hydra.output_subdir=null"]
    sweep = Path(hc.sweep.dir).name  # groups the sweep's wandb runs
    started = time.time()
    _sweep["child"] = proc = subprocess.Popen(cmd, env={**os.environ, CHILD_ENV: "1", "LRA_BENCH_SWEEP": sweep})
    try:
        code = proc.wait()
    finally:
        _sweep["child"] = None
    if code == EXIT_PREEMPTED or _sweep["signal"] is not None:
        scheduler = _sweep["previous"].get(_sweep["signal"])
        if callable(scheduler):  # a scheduler's job (submitit): this process runs this one job only
            # handled here; cleared before submitit pickles this function (and this state) for the requeued job
            signum, _sweep["signal"] = _sweep["signal"], None
            if code == EXIT_PREEMPTED:
                log.warning("job %s checkpointed after %s: handing over to the scheduler (requeue)", hc.job.num,
                            signal.Signals(signum).name)
                scheduler(signum, None)  # submitit: requeue on SIGUSR2 (then exits), log on SIGTERM
        if code == EXIT_PREEMPTED or _sweep["signal"] is not None:
            stop_sweep(f"job {hc.job.num} stopped (exit code {code})")
    if code == EXIT_BUSY:
        log.warning("job %s skipped: the same configuration is running in another process", hc.job.num)
        return None
    try:
        record = job_record(cfg, started)
        if record is None and code != 0:
            record = record_crash(cfg, code)
    except LRABenchError as e:  # the parent cannot even plan the job: its configuration is invalid
        raise JobFailed(f"job {hc.job.num} has an invalid configuration: {e}") from None
    if code == 0 and record is not None and record["status"] == "ok":
        return record.get("test_acc")
    status, message = (record["status"], record["message"]) if record else ("failed", f"exit code {code}")
    log.error("job %s (%s) ended %s: %s", hc.job.num, " ".join(hc.overrides.task), status, message)
    raise JobFailed(f"job {hc.job.num} ended {status}: {message} (recorded; every job that did not end ok is "
                    "logged above with its overrides; the same sweep command reruns the failed ones)")


@hydra.main(config_path="configs", config_name="run", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    from lra_bench.runner import run
    from lra_bench.train.loop import Preempted

    if HydraConfig.get().mode == RunMode.MULTIRUN and not os.environ.get(CHILD_ENV):
        return run_job_in_child(cfg)
    try:
        record = run(cfg)
    except RunInProgress as e:
        print(f"skipped: {e}", file=sys.stderr)
        sys.exit(EXIT_BUSY)
    except DiskFullError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(EXIT_FAILED)
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
    if (problem := check_overrides(sys.argv[1:], CONFIG_DIR, "run")) is not None:
        print(f"error: {problem}", file=sys.stderr)  # a misspelt option or key, with the closest valid one
        sys.exit(EXIT_CONFIG)
    if not os.environ.get(CHILD_ENV):  # a sweep's parent, from here on (a run and a job's process set their own)
        for sig in SWEEP_SIGNALS:
            signal.signal(sig, _on_parent_signal)
    main()
