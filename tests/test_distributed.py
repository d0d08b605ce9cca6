"""One run over 2 processes (torchrun, gloo on CPU) equals a single process with the same global batch, and a stop
signal that reaches one rank alone stops them all at one step boundary (no rank left waiting in a collective)."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from lra_bench.errors import ConfigError
from lra_bench.infra import distributed
from lra_bench.infra.timing import StepTimer
from lra_bench.run.runner import run
from lra_bench.store.records import read_records
from lra_bench.train.loop import Diverged, Preempted, finish_step
from tests.conftest import ROOT, compose_run

ARGS = ["profile=smoke", "model.dropout=0.0", "attention.attn_dropout=0.0", "trainer.max_steps=20",
        "trainer.eval_every=10", "trainer.batch_size=16"]
JOB_MARK = "LRA_TEST_JOB"  # in each job's environment: its ranks are found even when torchrun has died
TIMEOUT_S = 300  # the whole torchrun job; a collective gives up after LRA_DIST_TIMEOUT_S (below) and says where


def env_for(tmp_path: Path, name: str) -> dict[str, str]:
    return {**os.environ, "LRA_RESULTS_DIR": str(tmp_path / name), "LRA_CACHE_DIR": str(tmp_path / "cache"),
            "OMP_NUM_THREADS": "1", "LRA_DIST_TIMEOUT_S": "120", "PYTHONFAULTHANDLER": "1", JOB_MARK: str(tmp_path)}


TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


def launch(tmp_path: Path, name: str, prefix: list[str], args: list[str] = ARGS) -> dict:
    proc = subprocess.Popen([*prefix, "run.py", *args], cwd=ROOT, env=env_for(tmp_path, name), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, process_group=0,  # its own group
                            preexec_fn=no_core_files)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:  # where each rank waits and what it printed last, not only that it hung
        end_hung_job(proc, str(tmp_path))
        out, _ = proc.communicate(timeout=60)
        pytest.fail(f"the torchrun job did not end in {TIMEOUT_S} s; its output's end (a hung rank's stacks "
                    f"last):\n{out[-12000:]}")
    assert proc.returncode == 0, out[-3000:]
    (record,) = read_records(tmp_path / name)
    return record


def single_process(tmp_path: Path, args: list[str]) -> dict:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each rank (OMP_NUM_THREADS=1): the same float sums
    try:
        return run(compose_run(args, tmp_path))  # in this process: what `python run.py ARGS` runs
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow
def test_ddp_two_processes_match_single_process(tmp_path):
    single = single_process(tmp_path, ARGS)
    ddp = launch(tmp_path, "ddp", TORCHRUN)
    assert ddp["throughput"]["processes"] == 2 and single["throughput"]["processes"] == 1
    assert ddp["config_hash"] == single["config_hash"]  # same experiment, only the launch differs
    assert ddp["evals"] == single["evals"] and ddp["test_acc"] == single["test_acc"]
    assert ddp["best_step"] == single["best_step"]
    # examples/s counts the global batch (both ranks' halves)
    t = ddp["throughput"]
    assert t["examples_per_s"] == t["steps_per_s"] * 16


def end_hung_job(proc: subprocess.Popen, job: str) -> None:
    """Stop a torchrun job and every rank of it. torchrun starts each rank in its own session, so killing torchrun's
    group leaves them running (orphaned when torchrun dies first), blocked in a collective and holding the test's
    output pipe: the test would wait for ever. The ranks are found by the job's mark in their environment. SIGABRT
    first: with PYTHONFAULTHANDLER set, each writes every thread's stack to the job's output (no core file: the
    jobs start with a core size limit of 0, ``no_core_files``)."""
    for signum in (signal.SIGABRT, signal.SIGKILL):
        ranks = job_pids(job)  # again before SIGKILL: a pid the dump ended may be another process's by now
        for pid in ranks:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
        if ranks and signum == signal.SIGABRT:
            time.sleep(2)  # the stack dumps
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def no_core_files() -> None:
    """In a job's process before it starts (and so in its ranks): a SIGABRT writes stacks, not a core file."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def job_pids(job: str) -> list[int]:
    """The processes (torchrun and its ranks, orphaned or not) whose environment carries ``LRA_TEST_JOB=job``."""
    mark, found = f"{JOB_MARK}={job}".encode(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if mark in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return found


def rank_pids(parent: int) -> dict[int, int]:
    """{rank: pid} of the torchrun workers below ``parent`` (their RANK from /proc/<pid>/environ)."""
    found = {}
    for child in Path(f"/proc/{parent}/task/{parent}/children").read_text().split():
        try:
            env = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for item in env:
            if item.startswith(b"RANK="):
                found[int(item[5:])] = int(child)
    return found


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="finds the ranks through /proc (Linux)")
def test_a_stop_signal_to_one_rank_stops_both_at_one_step_and_the_rerun_resumes_to_the_same_record(tmp_path):
    """SIGTERM to rank 1 alone (a user's kill, a scheduler that signals one process): before the ranks agreed on
    stopping, rank 1 checkpointed and left while rank 0 waited in the next step's all-reduce, for ever."""
    args = [a for a in ARGS if not a.startswith(("trainer.max_steps", "trainer.eval_every"))] + [
        "trainer.max_steps=400", "trainer.eval_every=100", "trainer.log_every=10"]
    single = single_process(tmp_path, args)
    log = tmp_path / "first.log"
    with log.open("w") as out:
        proc = subprocess.Popen([*TORCHRUN, "run.py", *args], cwd=ROOT, env=env_for(tmp_path, "ddp"), stdout=out,
                                stderr=subprocess.STDOUT, process_group=0,  # its own group
                                preexec_fn=no_core_files)
    try:
        deadline = time.monotonic() + 120
        while "step 30 " not in log.read_text():  # training, past the first steps of both ranks
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        ranks = rank_pids(proc.pid)
        assert sorted(ranks) == [0, 1], ranks
        os.kill(ranks[1], signal.SIGTERM)
        proc.wait(timeout=120)  # a hang here is the bug
    finally:  # the ranks too: a SIGKILLed torchrun leaves its workers running, blocked in a collective
        end_hung_job(proc, str(tmp_path))
        proc.wait()
    text = log.read_text()
    assert proc.returncode != 0, text[-3000:]
    stopped = re.findall(r"preempted by (SIGTERM|a stop signal to another rank) at step (\d+); checkpoint written",
                         text)
    assert len(stopped) == 2 and len({step for _, step in stopped}) == 1, text[-3000:]  # both ranks, at one step
    assert sorted(by for by, _ in stopped) == ["SIGTERM", "a stop signal to another rank"], stopped  # rank 1, rank 0
    assert len(re.findall(r"step 30 loss", text)) == 1, text[-3000:]  # progress is logged by rank 0 alone
    assert not read_records(tmp_path / "ddp")  # preempted: no record, a checkpoint to resume from
    resumed = launch(tmp_path, "ddp", TORCHRUN, args)
    assert resumed["restarts"] == 1
    assert resumed["evals"] == single["evals"] and resumed["test_acc"] == single["test_acc"]


STUCK = """
import sys, time
from lra_bench.infra import distributed
from lra_bench.infra.distributed import DistInfo
how = sys.argv[1]
distributed.TEARDOWN_S = 1.0
distributed.dist.is_initialized = lambda: True
distributed.dist.barrier = lambda: None
def gone(): raise RuntimeError("Connection closed by peer")
distributed.dist.destroy_process_group = lambda: print("destroyed", flush=True)
if how == "hangs":
    distributed.dist.destroy_process_group = lambda: time.sleep(120)  # what one rank did in CI
elif how == "fails":
    distributed.dist.destroy_process_group = gone
elif how == "barrier fails":
    distributed.dist.barrier = gone
distributed.teardown(DistInfo(rank=1, world=2), exit_code=75)
if how == "gil":  # a stuck call that holds the GIL: no Python thread runs, faulthandler's does
    with distributed.exit_if_stuck(0.5, 75, "a GIL-holding loop", backstop_s=1.0):
        sum(range(10**12))
time.sleep(2.5)  # past the watchdog's time: it must not fire once teardown finished
print("ended by itself", flush=True)
"""


@pytest.mark.parametrize("how, code, said", [
    ("hangs", 75, "rank 1: leaving the process group did not finish in 1 s: ending this process with code 75"),
    ("fails", 0, "rank 1: leaving the process group failed (Connection closed by peer); the run's outcome stands"),
    ("leaves", 0, "destroyed\nended by itself"),
    ("barrier fails", 0, "rank 1: the last barrier failed (Connection closed by peer); the run's outcome stands"),
    ("gil", 1, "Timeout (0:00:01"),
])
def test_a_rank_stuck_leaving_the_group_ends_with_its_own_code_and_its_stacks(how, code, said):
    """CI once waited ~11 min on one rank that never returned from leaving the group after its run's record was
    written (the collective timeout does not bound it): now it ends after TEARDOWN_S with the code the run would
    have ended with, and every thread's stack on stderr to say where it was."""
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", STUCK, how], cwd=ROOT, capture_output=True, text=True, timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode == code and said in out, out[-3000:]
    assert ("ended by itself" in out) == (how in ("fails", "leaves", "barrier fails"))
    assert ("destroyed" in out) == (how in ("leaves", "barrier fails", "gil"))  # left even after a failed barrier
    if how in ("hangs", "gil"):  # the stacks: where the process was stuck
        assert re.search(r'File ".*", line \d+ in ' + ("teardown" if how == "hangs" else "<module>"), out), out
        assert time.monotonic() - t0 < 30


SLOW_PEER = """
import datetime, sys, time
import torch.distributed as dist
from lra_bench.infra import distributed
from lra_bench.infra.distributed import DistInfo
rank, port = int(sys.argv[1]), sys.argv[2]
distributed.TEARDOWN_S = 2.0
dist.init_process_group("gloo", rank=rank, world_size=2, init_method=f"tcp://127.0.0.1:{port}",
                        timeout=datetime.timedelta(seconds=60))
if rank == 0:
    time.sleep(6)  # writing a large record or a checkpoint: slow, not stuck
t0 = time.monotonic()
distributed.teardown(DistInfo(rank=rank, world=2), exit_code=75)
print(f"rank {rank} left after {time.monotonic() - t0:.1f} s", flush=True)
"""


def test_a_rank_that_reaches_the_end_first_waits_for_a_slow_peer_instead_of_ending(tmp_path):
    """Rank 1 reaches the end while rank 0 still writes the record (or, when stopped, the checkpoint): it waits in
    the barrier, bounded by the collective timeout, not by TEARDOWN_S -- which once ended it with the requeue code
    and made torchrun stop rank 0 mid-write."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    procs = [subprocess.Popen([sys.executable, "-c", SLOW_PEER, str(rank), port], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for rank in (0, 1)]
    outs = [proc.communicate(timeout=120)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outs
    assert "rank 0 left after" in outs[0] and "did not finish" not in outs[1], outs
    waited = float(re.search(r"rank 1 left after ([\d.]+) s", outs[1]).group(1))
    assert waited > 2.0, outs  # longer than SLOW_PEER's TEARDOWN_S, in the barrier


def test_the_collective_timeout_comes_from_the_environment_and_a_bad_value_says_what_to_give(monkeypatch):
    monkeypatch.setenv(distributed.TIMEOUT_ENV, "90")
    assert distributed.collective_timeout().total_seconds() == 90
    monkeypatch.delenv(distributed.TIMEOUT_ENV)
    assert distributed.collective_timeout().total_seconds() == 1800
    for bad in ("soon", "0", "-5", "nan"):
        monkeypatch.setenv(distributed.TIMEOUT_ENV, bad)
        with pytest.raises(ConfigError, match="LRA_DIST_TIMEOUT_S.*a number > 0"):
            distributed.collective_timeout()


def test_a_loss_that_diverged_on_another_rank_ends_this_one_at_the_same_step():
    """finish_step asks the ranks (``agree``): a finite loss here still raises when another rank's was not."""
    timer = StepTimer(torch.device("cpu"), 0)
    timer.start()
    with pytest.raises(Diverged, match="loss is nan at step 7 on another rank"):
        finish_step(7, torch.tensor(0.5), [], timer, None, agree=lambda bad: True)
    timer.start()
    assert finish_step(8, torch.tensor(0.5), [], timer, None, agree=lambda bad: bad) == 0.5
    assert distributed.any_rank(True) and not distributed.any_rank(False)  # outside torchrun: this rank's flag


def test_only_rank_zero_logs_progress_and_the_others_keep_their_warnings():
    """Every rank used to print its own "step N loss ..." lines; the slow test above counts them in a real job."""
    root, step_lines = logging.getLogger("lra_bench"), logging.getLogger("lra_bench.train.loop")
    before = root.level
    try:
        root.setLevel(logging.INFO)  # as run.py's logging configuration leaves it
        distributed.quiet_other_ranks(distributed.DistInfo(rank=0, world=2))
        assert step_lines.isEnabledFor(logging.INFO)
        distributed.quiet_other_ranks(distributed.DistInfo(rank=1, world=2))
        assert not step_lines.isEnabledFor(logging.INFO) and step_lines.isEnabledFor(logging.WARNING)
    finally:
        root.setLevel(before)


def test_a_rank_stopped_by_another_ranks_signal_says_so():
    assert str(Preempted(12, on_another_rank=True)).startswith(
        "preempted by a stop signal to another rank at step 12; checkpoint written")
    assert str(Preempted(12, signal="SIGTERM", on_another_rank=False)).startswith("preempted by SIGTERM at step 12")
