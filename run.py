"""Entry point: ``python run.py attention=NAME task=TASK profile=PROFILE`` (see configs/run.yaml).

Single run: trains in this process. Multirun (``-m``, ``+sweep=lra``, any launcher): every job re-executes
this script in a fresh child process with the job's overrides, so each job's peak memory is its own and a
crash or kill of one job is recorded without stopping the sweep, which then exits with code 1; SIGTERM/SIGUSR2
are forwarded so the child checkpoints before a preemption, and end the process with code 75 while it starts.
Under SLURM (submitit) the job's process then hands the signal to submitit, which requeues the job; the requeued
job resumes from the checkpoint. A sweep's parent whose jobs run in worker processes (joblib) passes the signal to
every running job, waits for their checkpoints, and exits 75.

Ctrl-C (SIGINT) stops a run or a sweep the same safe way -- a checkpoint at the next step boundary, one line, no
traceback -- but exits with 130 (128 + SIGINT, what a shell reports for Ctrl-C), not 75: 75 asks a scheduler's
wrapper to requeue, and a run the user stopped on purpose must not come back by itself. Either way the same
command resumes from the checkpointed step and says so.
"""

from __future__ import annotations

import signal
import sys
from typing import NoReturn

from lra_bench.errors import (  # the exit codes; imports nothing else, so the handlers below are set at once
    EXIT_BUSY,
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_PREEMPTED,
    exit_code_for,
)

SWEEP_SIGNALS = (signal.SIGTERM, signal.SIGUSR2, signal.SIGINT)


# the running job's process; the preemption signal this process got (while starting, or the sweep's); the handlers
# ours replaced (a scheduler's)
_sweep = {"child": None, "signal": None, "previous": {}}


def _on_signal_while_starting(signum: int, frame: object) -> None:
    """Until a run (``runner.stop_on_signals``) or a sweep's parent (``_on_sweep_signal``) takes the signals over --
    imports, config composition, the model build -- a preemption ends the process with the requeue code, not 143:
    nothing has started that could be lost."""
    _sweep["signal"] = signum  # kept: a SystemExit raised while a __del__ or a gc callback runs is swallowed
    # ("Exception ignored in ..."; seen in CI: the line printed, then the run trained on), so main() and
    # run_job_in_child() look at it again before anything starts
    if _inside(frame, FRAGILE_PACKAGES):  # composing a config: raised there, the exit can become a crash
        return  # stopped at the next check (_stop_if_signalled, main, run_job_in_child), once out of that code
    _stop_while_starting(signum)


#: code that a SystemExit raised by a signal handler in its midst leaves broken: seen in CI, SIGTERM during Hydra's
#: config composition ended the process with SIGABRT (-6), or with exit 1 and "'NoneType' object has no attribute
#: '_invalidate_flags_cache'", instead of the requeue code
FRAGILE_PACKAGES = ("hydra", "omegaconf", "antlr4")


def _inside(frame: object, packages: tuple[str, ...]) -> bool:
    """Whether the interrupted ``frame`` or one of its callers runs code of ``packages`` (top-level module names)."""
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).partition(".")[0] in packages:
            return True
        frame = frame.f_back
    return False


def _stop_if_signalled() -> None:
    """Stop for requeue when a start-up signal came in while it could not be acted on at once (see above)."""
    if _sweep["signal"] is not None:
        _stop_while_starting(_sweep["signal"])


def _stop_while_starting(signum: int) -> NoReturn:
    name = signal.Signals(signum).name
    print(f"{'interrupted' if name == 'SIGINT' else 'preempted'}: {name} while starting, before any run began; "
          "rerun the same command", file=sys.stderr, flush=True)
    raise SystemExit(exit_code_for(name))


for _sig in SWEEP_SIGNALS:  # first of all, before the slow imports below
    signal.signal(_sig, _on_signal_while_starting)

import contextlib  # noqa: E402 - after the signal handlers on purpose
import datetime as dt  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from hydra.types import RunMode  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from lra_bench.config.mixers import ENV as MIXERS_ENV  # noqa: E402
from lra_bench.config.mixers import register_outside_mixers  # noqa: E402
from lra_bench.config.overrides import check_overrides  # noqa: E402
from lra_bench.errors import (  # noqa: E402
    DataError,
    JobFailed,
    LRABenchError,
    RunFailed,
    RunInProgress,
    StorageError,
)
from lra_bench.infra.children import job_preexec  # noqa: E402
from lra_bench.infra.progress import SWEEP_JOB_ENV  # noqa: E402
from lra_bench.run.scheduler import hand_over  # noqa: E402
from lra_bench.run.sweeps import INVALID, claim_sweep_dir, invalid_record, note_job, print_summary  # noqa: E402

log = logging.getLogger("lra_bench")


def attention_names_for_help() -> str:
    """The help page's variant list (configs/hydra/help/lra.yaml: ``${lra_attentions:}``), from the registry."""
    import textwrap

    from lra_bench.attention import list_attentions

    names = [f"{n} (default)" if n == "softmax" else n for n in list_attentions()]
    return "\n".join(textwrap.wrap(", ".join(names), width=105, initial_indent=" " * 13,
                                   subsequent_indent=" " * 13)).lstrip()


OmegaConf.register_new_resolver("lra_attentions", attention_names_for_help)
OmegaConf.register_new_resolver("lra_sweep_dir", claim_sweep_dir, use_cache=True)  # one folder per sweep
CONFIG_DIR = Path(__file__).resolve().parent / "configs"
CHILD_ENV = SWEEP_JOB_ENV  # marks the process of a multirun job (no progress bars there)
JOB_STOP_WAIT_S = 120  # how long a sweep's parent waits for its jobs to checkpoint after passing them a signal


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
        _on_signal_while_starting(signum, frame)  # returns when it must wait for a safe point: noted, no job to stop
        return
    for pid in jobs:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
    deadline = time.monotonic() + JOB_STOP_WAIT_S
    while (left := [pid for pid in jobs if _running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    if left:
        log.warning("jobs %s did not stop within %ss of %s", left, JOB_STOP_WAIT_S, signal.Signals(signum).name)
    _sweep["signal"] = signum  # the exit code: 130 for Ctrl-C, else 75
    stop_sweep(f"{signal.Signals(signum).name} passed to the {len(jobs)} running job(s)")


def _on_sweep_signal(signum: int, frame: object) -> None:
    """In a sweep's parent: pass the signal to the running job (it checkpoints) and start no further job."""
    _sweep["signal"] = signum
    if _sweep["child"] is not None:
        _sweep["child"].send_signal(signum)


def stop_sweep(why: str, job: dict | None = None) -> None:
    """End the whole multirun (for requeueing, or because of Ctrl-C): finished records stay, a rerun of the sweep
    resumes the rest."""
    name = signal.Signals(_sweep["signal"]).name if _sweep["signal"] is not None else None
    if job is not None:
        note_job(**job, status="interrupted" if name == "SIGINT" else "preempted", message=why)
    print(f"{'interrupted' if name == 'SIGINT' else 'preempted'}: {why}; every finished record is kept, rerun the "
          "same sweep command to resume", file=sys.stderr)
    raise SystemExit(exit_code_for(name))  # not an Exception: Hydra's launcher does not catch it, starts no next job


def run_job_in_child(cfg: DictConfig) -> float | None:
    """Run this multirun job in a fresh process. A job that does not end ok has a record (its own, or a ``failed``
    or ``killed`` one written here when the process died without one) and raises ``JobFailed``: Hydra runs the
    remaining jobs, then the sweep exits with code 1."""
    from lra_bench.run.runner import already_finished, job_record, record_crash, record_path

    hc = HydraConfig.get()
    job = {"sweep_dir": hc.sweep.dir, "num": hc.job.num, "overrides": list(hc.overrides.task)}
    for sig in SWEEP_SIGNALS:  # for the parent's whole life: a signal between two jobs also stops the sweep
        previous = signal.signal(sig, _on_sweep_signal)
        if previous not in (_on_sweep_signal, _on_parent_signal, _on_signal_while_starting):
            _sweep["previous"][sig] = previous  # submitit's, in a SLURM job: it requeues the job
    if _sweep["signal"] is not None:
        stop_sweep(f"{signal.Signals(_sweep['signal']).name} received before job {hc.job.num}")  # no job line
    started = time.time()
    try:
        done = already_finished(cfg)
    except LRABenchError:  # an invalid configuration or missing data: the job's own process reports it, as always
        done = None
    if done is not None:
        log.info("skipping %s: finished record with status %s exists; no job process started (rerun=true runs it "
                 "again)", done["run_id"], done["status"])
        note_job(**job, status="skipped (finished before)", test_acc=done.get("test_acc"),
                 wall_s=time.time() - started, record=record_path(cfg))
        return done.get("test_acc")
    search = [o for o in hc.overrides.hydra if o.startswith("hydra.searchpath=")]  # your own config folders
    cmd = [sys.executable, str(Path(__file__).resolve()), *hc.overrides.task, *search, "hydra.mode=RUN",
           f"hydra.run.dir={hc.runtime.output_dir}", "hydra.output_subdir=null"]
    sweep = Path(hc.sweep.dir).name  # groups the sweep's wandb runs
    _sweep["child"] = proc = subprocess.Popen(cmd, env={**os.environ, CHILD_ENV: "1", "LRA_BENCH_SWEEP": sweep},
                                              preexec_fn=job_preexec(signal.SIGTERM))  # ends (checkpointed) with us
    try:
        code = proc.wait()
    finally:
        _sweep["child"] = None
    if code in (EXIT_PREEMPTED, EXIT_INTERRUPTED) or _sweep["signal"] is not None:
        if _sweep["signal"] is None and code == EXIT_INTERRUPTED:  # Ctrl-C reached the job alone
            _sweep["signal"] = signal.SIGINT
        scheduler = _sweep["previous"].get(_sweep["signal"])
        if callable(scheduler) and _sweep["signal"] != signal.SIGINT:  # a scheduler's job (submitit): this
            # process runs this one job only; Ctrl-C is never handed over for a requeue
            # handled here; cleared before submitit pickles this function (and this state) for the requeued job
            signum, _sweep["signal"] = _sweep["signal"], None
            if code == EXIT_PREEMPTED:
                log.warning("job %s checkpointed after %s: handing over to the scheduler (requeue)", hc.job.num,
                            signal.Signals(signum).name)
                hand_over(scheduler, signum)  # submitit: requeue on SIGUSR2 (then exits), log on SIGTERM
        if code in (EXIT_PREEMPTED, EXIT_INTERRUPTED) or _sweep["signal"] is not None:
            stop_sweep(f"job {hc.job.num} stopped (exit code {code})", {**job, "wall_s": time.time() - started})
    if code == EXIT_BUSY:
        log.warning("job %s skipped: the same configuration is running in another process", hc.job.num)
        note_job(**job, status="skipped (running in another process)", wall_s=time.time() - started)
        return None
    try:
        record = job_record(cfg, started)
        if record is None and code != 0:
            record = record_crash(cfg, code)
        where = record_path(cfg) if record is not None else None
    except DataError as e:  # the parent cannot even plan the job: its data is missing, not its configuration
        note_job(**job, status="missing data", wall_s=time.time() - started, message=str(e))
        raise JobFailed(f"job {hc.job.num} is missing its data: {e}") from None
    except LRABenchError as e:  # the parent cannot even plan the job: its configuration is invalid
        where = invalid_record(hc.runtime.output_dir, hc.job.num, job["overrides"], str(e))
        note_job(**job, status=INVALID, wall_s=time.time() - started, message=str(e), record=where)
        raise JobFailed(f"job {hc.job.num} has an invalid configuration: {e}") from None
    except Exception as e:  # the parent's own bookkeeping failed: the job is still listed, with why
        note_job(**job, status="failed", wall_s=time.time() - started, message=f"{type(e).__name__}: {e}")
        raise JobFailed(f"job {hc.job.num} could not be recorded: {type(e).__name__}: {e}") from e
    wall = time.time() - started
    if code == 0 and record is not None and record["status"] == "ok":
        before = str(record.get("finished_at") or "") < dt.datetime.fromtimestamp(started, dt.UTC).isoformat()
        note_job(**job, status="skipped (finished before)" if before else "ok", test_acc=record.get("test_acc"),
                 wall_s=wall, record=where)
        return record.get("test_acc")
    status, message = (record["status"], record["message"]) if record else ("failed", f"exit code {code}")
    if status == "failed" and str(message).startswith(f"{DataError.__name__}:"):
        status = "missing data"  # found missing while loading (a failed record says DataError)
    note_job(**job, status=status, wall_s=wall, record=where, message=message, test_acc=(record or {}).get("test_acc"))
    log.error("job %s (%s) ended %s: %s", hc.job.num, " ".join(hc.overrides.task), status, message)
    raise JobFailed(f"job {hc.job.num} ended {status}: {message} (recorded; every job that did not end ok is "
                    "logged above with its overrides; the same sweep command reruns the failed ones)")


def fail(error: LRABenchError, code: int) -> NoReturn:
    """One line (``error: ...``) and exit ``code``; the traceback too with HYDRA_FULL_ERROR=1, as for Hydra's own."""
    if os.environ.get("HYDRA_FULL_ERROR") == "1":
        import traceback

        traceback.print_exception(error)
    print(f"error: {error}", file=sys.stderr)  # once (a log line too printed it twice at a terminal)
    sys.exit(code)


@hydra.main(config_path="configs", config_name="run", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    from lra_bench.run.runner import run
    from lra_bench.train.loop import Preempted

    if HydraConfig.get().mode == RunMode.MULTIRUN and not os.environ.get(CHILD_ENV):
        return run_job_in_child(cfg)
    if _sweep["signal"] is not None:  # a start-up signal whose SystemExit was swallowed (see the handler)
        _stop_while_starting(_sweep["signal"])
    try:
        record = run(cfg)
    except RunInProgress as e:
        print(f"skipped: {e}", file=sys.stderr)
        sys.exit(EXIT_BUSY)
    except (StorageError, RunFailed) as e:  # a disk, a folder, an exit inside the run: recorded where possible
        fail(e, EXIT_FAILED)
    except LRABenchError as e:
        fail(e, EXIT_CONFIG)
    except Preempted as e:
        print(str(e), file=sys.stderr)  # "preempted ..." or "interrupted ...": one line, no traceback
        sys.exit(exit_code_for(e.signal))
    if record["status"] != "ok":
        print(f"run ended with status {record['status']}: {record['message']}", file=sys.stderr)
        sys.exit(EXIT_FAILED)
    return record["test_acc"]


if __name__ == "__main__":
    sys.argv = ["guard.force=true" if a == "--force" else a for a in sys.argv]  # start a run over guard.max_hours
    try:  # your own mixers, one file each (LRA_MIXERS): their attention=NAME options before anything is checked
        register_outside_mixers(os.environ.get(MIXERS_ENV))
    except LRABenchError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    _stop_if_signalled()  # one that came in while Hydra was imported
    problem = check_overrides(sys.argv[1:], CONFIG_DIR, "run")
    _stop_if_signalled()  # one that came in while the overrides were composed: the requeue code, not their verdict
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)  # a misspelt option or key, with the closest valid one
        sys.exit(EXIT_CONFIG)
    if not os.environ.get(CHILD_ENV):  # a sweep's parent, from here on (a run and a job's process set their own)
        for sig in SWEEP_SIGNALS:
            signal.signal(sig, _on_parent_signal)
    try:
        main()
    finally:
        print_summary()  # a multirun's: every job, also when one failed (Hydra then names only the first)
