"""The overnight sweep on a real SLURM engine: a one-node cluster with accounting (scripts/slurm_local.sh: munged,
MariaDB, slurmdbd, slurmctld, slurmd from the Debian packages), driven by ``hydra/launcher=slurm`` (submitit).

Nothing here imitates a SLURM command: the jobs are submitted with sbatch, watched with sacct, signalled with
scancel. Skipped only where the packages are missing and apt-get is not there to install them, or without root
(the daemons run as root); ``.ci/run`` installs the packages first.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lra_bench.run.runner import run
from lra_bench.store.records import read_records
from tests.conftest import ROOT, compose_run

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.xdist_group("slurm")]  # one cluster, fixed ports

SCRIPT = ROOT / "scripts" / "slurm_local.sh"
LAUNCHER = ["hydra/launcher=slurm", "hydra.launcher.gpus_per_node=null", "hydra.launcher.cpus_per_task=1",
            "hydra.launcher.mem_gb=1"]  # the one node has 2 CPUs and no GPU; the rest is configs/hydra/launcher
SMOKE = ["profile=smoke", "trainer.max_steps=20", "trainer.eval_every=10", "trainer.checkpoint_every=10"]
LONG = ["profile=smoke", "trainer.max_steps=240", "trainer.eval_every=40", "trainer.checkpoint_every=20",
        "trainer.log_every=40", "task.generator.num_train=1024"]  # long enough to be signalled mid-training
SAME = ("status", "best_val_acc", "best_step", "test_acc", "evals", "config_hash", "dataset_fingerprint")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory) -> dict[str, str]:
    """A running one-node cluster for this module (its own state folder and ports); stopped afterwards."""
    missing = subprocess.run(["dpkg-query", "-W", "slurmctld", "slurmd", "slurm-client", "slurmdbd", "munge",
                              "mariadb-server"], capture_output=True, text=True) if shutil.which("dpkg-query") else None
    if (missing is None or missing.returncode != 0) and not shutil.which("apt-get"):
        pytest.skip("the SLURM Debian packages are not installed and apt-get is not available to install them")
    if os.geteuid() != 0:
        pytest.skip("scripts/slurm_local.sh runs the SLURM daemons as root (SlurmUser=root); not root here")
    state = tmp_path_factory.mktemp("slurm")
    # 4 job slots on any machine: jobs mostly start up and wait, 4 at once keep 2 cores busy
    env = {**os.environ, "LRA_SLURM_DIR": str(state), "LRA_SLURM_PORT_BASE": "16910", "LRA_SLURM_CPUS": "4"}
    for step in ("install", "start"):
        done = subprocess.run(["bash", str(SCRIPT), step], env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            subprocess.run(["bash", str(SCRIPT), "stop"], env=env, capture_output=True, timeout=120)
            raise AssertionError(f"slurm_local.sh {step} failed:\n{done.stdout}\n{done.stderr}")
    env["SLURM_CONF"] = str(state / "etc" / "slurm.conf")
    yield env
    subprocess.run(["bash", str(SCRIPT), "stop"], env=env, capture_output=True, timeout=120)


@pytest.fixture
def sweep(slurm: dict[str, str]):
    """``sweep(root, *ARGS, name=...)``: start ``python run.py -m ARGS hydra/launcher=slurm`` with results and cache
    under ``root``; a sweep still running when the test ends is killed and its jobs cancelled."""
    started: list[tuple[subprocess.Popen, Path]] = []

    def start(root: Path, *args: str, name: str = "sweep") -> subprocess.Popen:
        env = {**slurm, "LRA_RESULTS_DIR": str(root / "runs"), "LRA_CACHE_DIR": str(root / "cache"),
               "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "run.py", "-m", *args, *LAUNCHER, f"hydra.sweep.dir={root / name}"]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        started.append((proc, root / name))
        return proc

    yield start
    for proc, folder in started:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        jobs = {p.parent.name for p in (folder / ".submitit").glob("*/*_submitted.pkl")}
        if jobs:
            subprocess.run(["scancel", *sorted(jobs)], env=slurm, capture_output=True, timeout=60)


def slurm_cmd(slurm: dict[str, str], *cmd: str) -> str:
    done = subprocess.run(cmd, env=slurm, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr}"
    return done.stdout


def job_ids(root: Path, count: int, name: str = "sweep", timeout: float = 120) -> list[str]:
    """The SLURM ids of the sweep's ``count`` jobs (``ARRAY_TASK``, or a plain id for a one-job sweep), in job
    order, from submitit's folder: one folder per job, named after it."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        ids = [p.parent.name for p in (root / name / ".submitit").glob("*/*_submitted.pkl")]
        if len(ids) == count:
            return sorted(ids, key=lambda job: int(job.partition("_")[2] or 0))
        time.sleep(0.2)
    raise AssertionError(f"{count} jobs not submitted in {timeout}s")


def states(slurm: dict[str, str], job: str, timeout: float = 60) -> list[str]:
    """Every state sacct (the accounting database) holds for ``job``, requeued attempts included, once the job has
    ended (a job's result file can come a moment before its end reaches the accounting)."""
    deadline = time.time() + timeout
    while True:
        out = slurm_cmd(slurm, "sacct", "-j", job, "-X", "-n", "-P", "--duplicates", "-o", "JobID,State")
        found = [line.strip() for line in out.splitlines() if line.strip()]
        if not any(s.endswith(("|RUNNING", "|PENDING", "|COMPLETING")) for s in found) or time.time() > deadline:
            return found
        time.sleep(0.5)


def job_logs(root: Path, name: str = "sweep") -> str:
    return "".join(p.read_text(errors="replace") for p in sorted((root / name / ".submitit").rglob("*_log.*")))


def checkpoint_step(root: Path) -> int:
    steps = [json.loads(p.read_text())["step"] for p in (root / "cache" / "checkpoints").rglob("ckpt.json")]
    return max(steps, default=-1)


def by_attention(root: Path) -> dict[str, dict]:
    return {r["attention"]: r for r in read_records(root / "runs")}


def test_sweep_of_three_jobs_lands_the_records_of_local_runs(slurm, sweep, tmp_path):
    proc = sweep(tmp_path, "attention=softmax,linear,local", *SMOKE)
    local = {a: run(compose_run([*SMOKE, f"attention={a}"], tmp_path / a)) for a in ("softmax", "linear", "local")}
    out, _ = proc.communicate(timeout=400)
    assert proc.returncode == 0, out[-4000:]
    jobs = job_ids(tmp_path, 3)
    assert [state for job in jobs for state in states(slurm, job)] == [f"{job}|COMPLETED" for job in jobs]
    recs = by_attention(tmp_path)
    assert sorted(recs) == ["linear", "local", "softmax"]
    for attention, rec in recs.items():
        assert rec["status"] == "ok" and rec["restarts"] == 0
        for key in SAME:
            assert rec[key] == local[attention][key], (attention, key)


def test_preemption_signal_checkpoints_requeues_and_resumes_to_the_same_record(slurm, sweep, tmp_path):
    proc = sweep(tmp_path, "attention=softmax", *LONG)
    (job,) = job_ids(tmp_path, 1)
    deadline = time.time() + 300
    while checkpoint_step(tmp_path) < 20:  # mid-training: the first checkpoint is written, 220 steps to go
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[0][-4000:]
        time.sleep(0.1)
    slurm_cmd(slurm, "scancel", "--signal=USR2", job)  # SLURM's pre-timeout signal, as --signal=USR2@120 sends it
    reference = run(compose_run(["attention=softmax", *LONG], tmp_path / "reference"))  # while it is requeued
    out, _ = proc.communicate(timeout=400)
    assert proc.returncode == 0, out[-4000:]
    logs = job_logs(tmp_path)
    assert "preempted by SIGUSR2 at step" in logs and "resuming from" in logs, logs[-4000:]
    assert f"{job}|REQUEUED" in states(slurm, job), states(slurm, job)  # the engine requeued it
    assert states(slurm, job)[-1] == f"{job}|COMPLETED"
    (rec,) = read_records(tmp_path / "runs")
    assert rec["status"] == "ok" and rec["restarts"] == 1
    for key in SAME:
        assert rec[key] == reference[key], key


def test_scancel_of_one_job_the_others_finish_and_a_rerun_completes_only_it(slurm, sweep, tmp_path):
    grid = ["attention=softmax,linear", "profile=smoke", "trainer.max_steps=120", "trainer.eval_every=40",
            "trainer.checkpoint_every=10"]
    proc = sweep(tmp_path, *grid)
    cancelled = job_ids(tmp_path, 2)[1]
    deadline = time.time() + 300
    while not list((tmp_path / "cache" / "checkpoints").rglob("linear/*/ckpt.json")):  # mid-training
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[0][-4000:]
        time.sleep(0.1)
    slurm_cmd(slurm, "scancel", cancelled)
    t0 = time.time()
    out, _ = proc.communicate(timeout=300)
    assert time.time() - t0 < 240, "the sweep's parent must not wait for ever on a cancelled job"
    assert proc.returncode != 0 and cancelled in out and "CANCELLED" in out, out[-4000:]
    deadline = time.time() + 300
    while "softmax" not in by_attention(tmp_path):  # the other job goes on without its parent
        assert time.time() < deadline, job_logs(tmp_path)[-4000:]
        time.sleep(0.5)
    first = by_attention(tmp_path)
    assert list(first) == ["softmax"] and first["softmax"]["status"] == "ok"

    rerun = sweep(tmp_path, *grid, name="rerun")
    out, _ = rerun.communicate(timeout=400)
    assert rerun.returncode == 0, out[-4000:]
    after = by_attention(tmp_path)
    assert after["softmax"] == first["softmax"], "the finished job must not run again"
    assert after["linear"]["status"] == "ok"
    assert job_logs(tmp_path, "rerun").count("record written to") == 1


def test_two_sweeps_of_one_grid_at_once_run_each_job_once(slurm, sweep, tmp_path):
    grid = ["attention=softmax,linear", *SMOKE]
    first, second = sweep(tmp_path, *grid, name="first"), sweep(tmp_path, *grid, name="second")
    outs = [p.communicate(timeout=400)[0] for p in (first, second)]
    assert (first.returncode, second.returncode) == (0, 0), "\n".join(o[-3000:] for o in outs)
    recs = by_attention(tmp_path)
    assert sorted(recs) == ["linear", "softmax"] and all(r["status"] == "ok" for r in recs.values())
    logs = job_logs(tmp_path, "first") + job_logs(tmp_path, "second")
    assert logs.count("record written to") == 2, "each configuration trained exactly once"
    skipped = logs.count("already running") + logs.count("finished record with status ok exists")
    assert skipped == 2, logs[-4000:]
    assert not list((tmp_path / "runs").rglob("attempts")), "no second attempt of a run"


def test_a_preempted_rerun_requeued_three_times_finishes_equal_to_an_uninterrupted_run(slurm, sweep, tmp_path):
    """Issue 40: rerun=true took the checkpoint of its own preempted attempt for a finished run's leftover and
    deleted it, so a requeued rerun never got past its first preemption."""
    first = run(compose_run(["attention=softmax", *LONG], tmp_path))  # the finished record the rerun replaces
    proc = sweep(tmp_path, "attention=softmax", "rerun=true", *LONG)
    (job,) = job_ids(tmp_path, 1)
    step = -1
    for requeues in (1, 2, 3):  # preempt once it runs (a checkpoint newer than the last), wait for the requeue
        deadline = time.time() + 300
        while checkpoint_step(tmp_path) <= step:
            assert proc.poll() is None and time.time() < deadline, proc.communicate()[0][-4000:]
            time.sleep(0.1)
        slurm_cmd(slurm, "scancel", "--signal=USR2", job)
        deadline = time.time() + 300
        while slurm_cmd(slurm, "sacct", "-j", job, "-X", "-n", "-P", "--duplicates", "-o",
                        "JobID,State").count(f"{job}|REQUEUED") < requeues:
            assert proc.poll() is None and time.time() < deadline, proc.communicate()[0][-4000:]
            time.sleep(0.2)
        step = checkpoint_step(tmp_path)  # the preempted attempt's last checkpoint
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-4000:]
    assert [s for s in states(slurm, job) if s.endswith("|REQUEUED")] == [f"{job}|REQUEUED"] * 3, states(slurm, job)
    assert states(slurm, job)[-1] == f"{job}|COMPLETED"
    assert job_logs(tmp_path).count("resuming from") == 3
    (rec,) = read_records(tmp_path / "runs")
    assert rec["status"] == "ok" and rec["restarts"] == 3 and rec["finished_at"] > first["finished_at"]
    for key in (*SAME, "test_predictions"):
        assert rec[key] == first[key], key


def test_start_brings_the_cluster_back_after_its_controller_is_killed(slurm):
    """A killed slurmctld stays a zombie where the container's init never reaps: its pid file still named a 'live'
    process, so `start` kept it and waited 30 s for a controller that was gone."""
    pid = int((Path(slurm["LRA_SLURM_DIR"]) / "run" / "slurmctld.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 60
    while (Path(f"/proc/{pid}/stat").exists() and
           Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")):
        assert time.time() < deadline, "slurmctld survived SIGKILL"
        time.sleep(0.05)
    done = subprocess.run(["bash", str(SCRIPT), "start"], env=slurm, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert slurm_cmd(slurm, "sinfo", "-h", "-o", "%t").strip() in ("idle", "mix", "alloc")
