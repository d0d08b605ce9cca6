"""Fault injection: an overnight sweep survives SIGKILL, SIGTERM, OOM, NaN, corrupt files, concurrent
writers, a full disk and an interrupted sweep, losing no finished result."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from lra_bench.run.runner import run
from lra_bench.store import files, records
from lra_bench.store.records import read_records, write_record
from lra_bench.train import checkpoint
from tests.conftest import ROOT, compose_run

pytestmark = pytest.mark.xdist_group("test_faults")  # xdist: one worker makes the reference run once

LONG = ["profile=smoke", "trainer.max_steps=240", "trainer.eval_every=40", "trainer.checkpoint_every=20",
        "trainer.log_every=40", "task.generator.num_train=1024"]
SAME = ("status", "best_val_acc", "best_step", "test_acc", "evals", "config_hash", "dataset_fingerprint")


def env_for(root: Path) -> dict[str, str]:
    return {**os.environ, "LRA_RESULTS_DIR": str(root / "runs"), "LRA_CACHE_DIR": str(root / "cache")}


def start(root: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "run.py", *args], cwd=ROOT, env=env_for(root),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # hydra logs to stdout


def wait_for_checkpoint(root: Path, min_step: int, proc: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        for meta in (root / "cache" / "checkpoints").rglob("ckpt.json"):
            try:
                if json.loads(meta.read_text())["step"] >= min_step:
                    return
            except (OSError, ValueError):
                pass
        assert proc.poll() is None, f"run ended before a checkpoint: {proc.stdout.read()[-2000:]}"
        time.sleep(0.05)
    raise AssertionError("no checkpoint in time")


def only_record(root: Path) -> dict:
    (rec,) = read_records(root / "runs")
    return rec


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run every resumed run must equal."""
    root = tmp_path_factory.mktemp("reference")
    return run(compose_run(LONG, root))


@pytest.mark.slow
def test_sigkill_mid_training_resumes_bit_exact(tmp_path, reference):
    proc = start(tmp_path, *LONG)
    wait_for_checkpoint(tmp_path, 60, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not list((tmp_path / "runs").rglob("record.json")), "a killed run must not leave a record"
    resumed = start(tmp_path, *LONG)
    err, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err[-3000:]
    assert "resuming from" in err
    rec = only_record(tmp_path)
    for key in SAME:
        assert rec[key] == reference[key], key
    assert (reference["restarts"], rec["restarts"]) == (0, 1)
    assert not list((tmp_path / "cache" / "checkpoints").rglob("ckpt.pt")), "checkpoints kept after the record"


@pytest.mark.slow
def test_sigterm_checkpoints_exits_for_requeue_then_resumes(tmp_path, reference):
    proc = start(tmp_path, *LONG)
    wait_for_checkpoint(tmp_path, 20, proc)
    proc.send_signal(signal.SIGTERM)
    err, _ = proc.communicate(timeout=120)
    assert proc.returncode == 75, err[-2000:]  # EX_TEMPFAIL: requeue me
    assert "preempted" in err and not list((tmp_path / "runs").rglob("record.json"))
    assert list((tmp_path / "cache" / "checkpoints").rglob("ckpt.pt"))
    resumed = start(tmp_path, *LONG)
    err, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err[-3000:]
    rec = only_record(tmp_path)
    for key in SAME:
        assert rec[key] == reference[key], key
    assert rec["restarts"] == 1


@pytest.mark.slow
def test_ctrl_c_checkpoints_in_one_line_and_the_rerun_resumes_from_that_step(tmp_path, reference):
    proc = start(tmp_path, *LONG)
    for line in proc.stdout:  # hydra logs to stdout: wait until training is under way
        if "step 40 loss" in line:
            break
    proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-2000:]  # 128 + SIGINT: stopped on purpose, not a requeue
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out[-3000:]
    (line,) = [line for line in out.splitlines() if line.startswith("interrupted")]
    step = int(re.search(r"at step (\d+);", line).group(1))
    assert step >= 40 and f"resume from step {step}" in line
    assert not list((tmp_path / "runs").rglob("record.json"))
    resumed = start(tmp_path, *LONG)
    out, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, out[-3000:]
    assert f"(step {step})" in out and "resuming from" in out, "the rerun must say from which step it resumes"
    rec = only_record(tmp_path)
    for key in SAME:
        assert rec[key] == reference[key], key


def test_corrupt_checkpoint_is_skipped_with_a_warning(tmp_path, caplog):
    directory = tmp_path / "ck"
    checkpoint.save(directory, {"step": 1, "x": torch.ones(3)})
    checkpoint.save(directory, {"step": 2, "x": torch.ones(3) * 2})
    current = directory / "ckpt.pt"
    current.write_bytes(current.read_bytes()[:50])  # truncated
    state = checkpoint.load(directory)
    assert state["step"] == 1, "must fall back to the previous good checkpoint"
    assert "checksum mismatch" in caplog.text
    (directory / "ckpt.prev.pt").write_bytes(b"garbage")
    assert checkpoint.load(directory) is None


def test_disk_full_while_checkpointing_keeps_the_previous_one(tmp_path, monkeypatch):
    directory = tmp_path / "ck"
    checkpoint.save(directory, {"step": 5, "x": torch.ones(2)})

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint.torch, "save", full)
    with pytest.raises(OSError, match=f"no space left on {directory}"):
        checkpoint.save(directory, {"step": 6, "x": torch.ones(2)})
    monkeypatch.undo()
    assert checkpoint.load(directory)["step"] == 5
    assert not [p for p in directory.iterdir() if p.name.endswith(".tmp")]


def test_disk_full_while_writing_a_record_keeps_the_previous_one(tmp_path, monkeypatch, smoke_cfg):
    first = run(smoke_cfg("rerun=true"))
    path = next((tmp_path / "runs").rglob("record.json"))
    real_fdopen = os.fdopen

    class FullFile:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            raise OSError(28, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.f, name)

    monkeypatch.setattr(files.os, "fdopen", lambda fd, mode, newline=None: FullFile(real_fdopen(fd, mode)))
    with pytest.raises(OSError, match=f"no space left on {path.parent}"):
        write_record({**first, "test_acc": 0.99}, tmp_path / "runs")
    monkeypatch.undo()
    assert records.read_record(path)["test_acc"] == first["test_acc"]
    assert sorted(p.name for p in path.parent.iterdir()) == ["record.json", "run.lock"]


def test_cpu_allocation_failure_is_an_oom_record(smoke_cfg, monkeypatch):
    import lra_bench.models.encoder as enc

    def boom(self, input_ids):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory")

    monkeypatch.setattr(enc.Classifier, "forward", boom)
    rec = run(smoke_cfg())
    assert rec["status"] == "oom" and "can't allocate memory" in rec["message"]


def test_nan_loss_is_diverged_with_step_and_not_retried(smoke_cfg, monkeypatch):
    import lra_bench.models.encoder as enc

    real = enc.Classifier.forward
    calls = {"n": 0}

    def nan_after_3(self, input_ids):
        calls["n"] += 1
        out = real(self, input_ids)
        return out * float("nan") if self.training and calls["n"] > 3 else out

    monkeypatch.setattr(enc.Classifier, "forward", nan_after_3)
    import lra_bench.run.runner as runner

    real_guard = runner.guard_run

    def guard_then_count_from_zero(*args):  # the time probe's steps run forward too: count the run's own steps
        out = real_guard(*args)
        calls["n"] = 0
        return out

    monkeypatch.setattr(runner, "guard_run", guard_then_count_from_zero)
    rec = run(smoke_cfg())
    assert rec["status"] == "diverged" and "step 4" in rec["message"]
    calls["n"] = 0
    again = run(smoke_cfg())  # same command: the deterministic failure is not retried
    assert calls["n"] == 0 and again["run_id"] == rec["run_id"] and again["status"] == "diverged"


def test_finished_run_is_skipped_and_rerun_forces(smoke_cfg, monkeypatch):
    first = run(smoke_cfg())
    import lra_bench.run.runner as runner

    monkeypatch.setattr(runner, "train", lambda *a, **k: pytest.fail("a finished run was trained again"))
    assert run(smoke_cfg())["finished_at"] == first["finished_at"]
    monkeypatch.undo()
    assert run(smoke_cfg("rerun=true"))["finished_at"] != first["finished_at"]


def test_corrupt_record_is_skipped_and_reports_survive(smoke_cfg, tmp_path, caplog):
    rec = run(smoke_cfg())
    path = next((tmp_path / "runs").rglob("record.json"))
    text = path.read_text()
    path.write_text(text.replace(f'"test_acc": {rec["test_acc"]}', '"test_acc": 1.0'))  # tampered
    (path.parent.parent / "other").mkdir()
    (path.parent.parent / "other" / "record.json").write_text(text[: len(text) // 2])  # truncated
    assert read_records(tmp_path / "runs") == []
    assert "checksum mismatch" in caplog.text or "skipping record" in caplog.text
    from lra_bench.reports.store import read_json_tree

    rows, skipped = read_json_tree(tmp_path / "runs", "record.json")
    assert rows == [] and len(skipped) == 2


WRITER = """
import sys
from lra_bench.store.records import REQUIRED_FIELDS, write_record
root, who = sys.argv[1], sys.argv[2]
for i in range(40):
    rec = {k: None for k in REQUIRED_FIELDS}
    shared = i % 2 == 0  # half the records go to the same paths from both writers
    rec.update(run_id=str(i), task="listops", attention="softmax", profile="p", seed=i,
               config_hash=("s" if shared else who) * 64, status="ok", message=who, config={"pad": "x" * 5000})
    write_record(rec, root)
"""


def test_two_processes_write_one_store_without_loss_or_mixing(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), who], cwd=ROOT) for who in "ab"]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    recs = read_records(tmp_path)
    # 20 shared paths (last writer wins, whole) + 20 own paths per writer
    assert len(recs) == 60
    assert len({(r["config_hash"], r["seed"]) for r in recs}) == 60
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.slow
def test_killed_sweep_resumes_with_only_the_missing_runs(tmp_path):
    args = ["-m", "attention=softmax,linear", "profile=smoke", "trainer.max_steps=60", "trainer.eval_every=30"]
    proc = subprocess.Popen([sys.executable, "run.py", *args], cwd=ROOT, env=env_for(tmp_path),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    # The event to wait for is the second job's start (its run folder), not the first record: a job that wrote its
    # record but was killed before clearing its checkpoints is rerun, not skipped (under load that window is seconds)
    second = tmp_path / "runs" / "listops" / "linear"
    deadline = time.time() + 300
    while time.time() < deadline and not second.exists():
        assert proc.poll() is None, "sweep ended before it could be interrupted"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole sweep, job children included
    proc.wait()
    done = {p: p.stat().st_mtime_ns for p in (tmp_path / "runs").rglob("record.json")}
    assert len(done) == 1  # killed while the second job ran
    again = subprocess.run([sys.executable, "run.py", *args], cwd=ROOT, env=env_for(tmp_path),
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    recs = read_records(tmp_path / "runs")
    assert sorted(r["attention"] for r in recs) == ["linear", "softmax"]
    assert all(r["status"] == "ok" for r in recs)
    for path, mtime in done.items():
        assert path.stat().st_mtime_ns == mtime, f"{path} was run again"
    assert (again.stdout + again.stderr).count("no job process started") == len(done)  # the parent skips it


def test_checkpoint_of_another_format_is_skipped(tmp_path, caplog):
    directory = tmp_path / "ck"
    checkpoint.save(directory, {"step": 3})
    meta = json.loads((directory / "ckpt.json").read_text())
    (directory / "ckpt.json").write_text(json.dumps({**meta, "format": checkpoint.FORMAT - 1}))
    assert checkpoint.load(directory) is None
    assert "another version" in caplog.text
